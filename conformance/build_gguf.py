"""Write the tier's tiny model (``build_tiny_model.py``) as one GGUF file, for llama.cpp's server.

No download and no converter run: the model is ours and small, so its
tensors and tokenizer are written directly with the ``gguf`` package
(pinned in ``conformance/install.sh``), the way llama.cpp's
``convert_hf_to_gguf.py`` writes a Llama:

- architecture ``llama``, float32 tensors under GGUF's names
  (``token_embd``, ``blk.N.attn_q`` …, ``output``), with the query and key
  projections permuted from Hugging Face's rotate-half RoPE layout to
  GGML's interleaved pairs (``LlamaModel.permute`` in the converter);
- the tokenizer as llama.cpp's ``gpt2`` BPE (byte-level) with the ``gpt-2``
  pre-tokenizer, which is the regex of ``tokenizers``' ``ByteLevel``
  pre-tokenizer, and the merges in rank order: so llama-server splits a
  text into exactly the ids the model's ``tokenizer.json`` gives (checked
  by ``tests/conformance/test_llama_server.py`` against the running server).
  The chat template's special tokens are ``CONTROL`` tokens; BOS is added
  to a plain prompt (``add_bos_token``), as the Hugging Face post-processor
  does; the end of a turn (``<|eot_id|>``) is EOS and EOT;
- the chat template from ``tokenizer_config.json``, verbatim.

The converter itself is not used because it hashes a tokenizer's output to
recognise its pre-tokenizer and refuses one it has never seen (ours).

The output is byte-identical for the same model folder (GGUF has no
timestamps). Usage: ``python build_gguf.py MODEL_DIR OUT.gguf``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import gguf
import numpy as np
from safetensors.numpy import load_file

# Hugging Face parameter names (per layer) to GGUF's
LAYER_NAMES = {
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
}
TOP_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Rotate-half RoPE rows to GGML's interleaved order (convert_hf_to_gguf's ``permute``)."""
    rows = w.shape[0] // n_head // 2
    return w.reshape(n_head, 2, rows, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_tensors(weights: dict[str, np.ndarray], config: dict[str, Any]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for name, gname in TOP_NAMES.items():
        out[gname] = weights[name]
    for i in range(int(config["num_hidden_layers"])):
        for hf, gname in LAYER_NAMES.items():
            w = weights[f"model.layers.{i}.{hf}"]
            if hf.startswith("self_attn.q_proj"):
                w = permute(w, int(config["num_attention_heads"]))
            elif hf.startswith("self_attn.k_proj"):
                w = permute(w, int(config["num_key_value_heads"]))
            out[f"blk.{i}.{gname}"] = w
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()}


def vocabulary(tokenizer: dict[str, Any]) -> tuple[list[str], list[int], list[str]]:
    """Tokens by id, their GGUF types, and the merges as ``"a b"`` in rank order."""
    model = tokenizer["model"]
    assert model["type"] == "BPE", model["type"]
    by_id: dict[int, str] = {int(i): t for t, i in model["vocab"].items()}
    types = {i: int(gguf.TokenType.NORMAL) for i in by_id}
    for added in tokenizer.get("added_tokens", []):
        i = int(added["id"])
        by_id[i] = added["content"]
        types[i] = int(gguf.TokenType.CONTROL if added["special"] else gguf.TokenType.USER_DEFINED)
    n = max(by_id) + 1
    missing = [i for i in range(n) if i not in by_id]
    assert not missing, f"token ids without a token: {missing[:10]}"
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return [by_id[i] for i in range(n)], [types[i] for i in range(n)], merges


def build(model_dir: Path, out: Path) -> dict[str, object]:
    config = json.loads((model_dir / "config.json").read_text())
    tok_json = json.loads((model_dir / "tokenizer.json").read_text())
    tok_cfg = json.loads((model_dir / "tokenizer_config.json").read_text())
    tokens, types, merges = vocabulary(tok_json)
    ids = {t: i for i, t in enumerate(tokens)}
    assert len(tokens) == int(config["vocab_size"]), (len(tokens), config["vocab_size"])

    heads = int(config["num_attention_heads"])
    head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    w = gguf.GGUFWriter(str(tmp), "llama")
    w.add_name("pytest-llmperf tiny llama")
    w.add_context_length(int(config["max_position_embeddings"]))
    w.add_embedding_length(int(config["hidden_size"]))
    w.add_block_count(int(config["num_hidden_layers"]))
    w.add_feed_forward_length(int(config["intermediate_size"]))
    w.add_head_count(heads)
    w.add_head_count_kv(int(config["num_key_value_heads"]))
    w.add_layer_norm_rms_eps(float(config["rms_norm_eps"]))
    w.add_rope_freq_base(float(config["rope_theta"]))
    w.add_rope_dimension_count(head_dim)
    w.add_vocab_size(len(tokens))
    w.add_file_type(gguf.LlamaFileType.ALL_F32)

    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(ids[tok_cfg["bos_token"]])
    w.add_eos_token_id(ids[tok_cfg["eos_token"]])
    w.add_eot_token_id(ids[tok_cfg["eos_token"]])
    w.add_pad_token_id(ids[tok_cfg["pad_token"]])
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template(tok_cfg["chat_template"])

    weights = load_file(str(model_dir / "model.safetensors"))
    for name, tensor in gguf_tensors(weights, config).items():
        w.add_tensor(name, tensor)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    read_back = gguf.GGUFReader(str(tmp))
    assert len(read_back.tensors) == len(weights), (len(read_back.tensors), len(weights))
    tmp.replace(out)
    control = [t for t, k in zip(tokens, types, strict=True) if k == gguf.TokenType.CONTROL]
    return {
        "gguf": str(out),
        "bytes": out.stat().st_size,
        "tensors": len(weights),
        "tokens": len(tokens),
        "merges": len(merges),
        "control_tokens": control,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    print(json.dumps(build(args.model_dir, args.out)))


if __name__ == "__main__":
    main()
