"""Build a tiny random Llama in a folder, with no download: the conformance tier's model.

Real servers need a real model folder (config, tokenizer, weights) and this
machine has no network, so the tier makes one at set-up: a byte-level BPE
tokenizer trained with ``tokenizers`` on the project's own corpus (so the
workloads' prompts tokenize into whole words, as a real tokenizer would), a
Llama-3-like chat template, and a few random layers written as safetensors.

Everything is seeded: the same script gives the same bytes. The weights are
drawn with numpy rather than by a ``transformers`` model's initialiser, so the
folder does not depend on which torch or transformers version runs this.

The output rows of the special tokens (end of text, end of turn, headers) are
zero, so their logit is exactly 0 while ordinary tokens' logits are spread
around it: greedy decoding never ends a reply early, and a server that
cannot honour ``ignore_eos`` still generates ``max_tokens``. Byte tokens stay
reachable, so the model does emit partial UTF-8 now and then, which is what
makes servers stream empty ``"content": ""`` deltas (issue 12).

Usage: ``python build_tiny_model.py OUT_DIR [--corpus PATH]``; needs numpy,
safetensors and tokenizers (any server venv of the tier has them).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

SEED = 20261101
HIDDEN = 256
HEADS = 4  # head_dim 64: vLLM's CPU attention backends accept 64, not every size
KV_HEADS = 4
LAYERS = 2
INTERMEDIATE = 512
MAX_POSITIONS = 2048
VOCAB_TARGET = 512  # small: words split into pieces, unlike the approximate tokenizer

BOS, EOS, EOT = "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"
HEADER_START, HEADER_END = "<|start_header_id|>", "<|end_header_id|>"
SPECIALS = [BOS, EOS, HEADER_START, HEADER_END, EOT]

# Llama 3's template, less the date and tool preamble: one BOS, then per
# message a header, a blank line, the trimmed content and an end-of-turn.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}"
    "{{ message['content'] | trim }}{{ '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}"
)

DEFAULT_CORPUS = Path(__file__).resolve().parent.parent / "pytest_llmperf/workloads/corpus.txt"


def generated_text(seed: int) -> str:
    """Extra training text: numbers, roles and corpus words reshuffled.

    The corpus alone is 4 KB; this widens the merges a little (numbers,
    capitalised words, the template's role names) so a prompt that is not
    cut from the corpus still tokenizes sensibly.
    """
    step = 7 + seed % 5
    lines = [" ".join(str(n) for n in range(0, 1000, step))]
    lines.append("system user assistant tool System User Assistant Tool")
    lines.append("The quick brown fox jumps over the lazy dog. 0123456789 ,.;:!?'\"()-")
    return "\n".join(lines)


def shuffled_words(text: str, seed: int, n: int) -> str:
    """``n`` words of ``text`` in a seeded random order (more pair statistics)."""
    words = text.split()
    rng = random.Random(seed)
    return " ".join(rng.choice(words) for _ in range(n))


def train_tokenizer(texts: list[str]) -> Tokenizer:
    """A byte-level BPE (GPT-2/Llama-3 style) with the chat template's special tokens."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_TARGET,
        min_frequency=2,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    # As Llama 3: BOS is prepended when special tokens are added (completions
    # prompts); the chat template writes its own BOS and is encoded without.
    tok.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
            ),
        ]
    )
    return tok


def llama_config(vocab: int, bos_id: int, eos_ids: list[int]) -> dict[str, object]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HIDDEN // HEADS,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_POSITIONS,
        "initializer_range": 0.02,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "bos_token_id": bos_id,
        "eos_token_id": eos_ids,
        "torch_dtype": "float32",
        "use_cache": True,
    }


# Partial UTF-8 on purpose: an em dash is three byte tokens (E2 80 94); the
# first two decode to nothing, so a server streams them as empty deltas.
EM_DASH_BYTES = (0xE2, 0x80, 0x94)
MARKERS = 3  # residual dims 0..2 carry "an em dash starts / continues" and nothing else
DASH_EVERY = 5  # one ordinary token in DASH_EVERY is followed by an em dash


def byte_token_ids(tok: Tokenizer, data: tuple[int, ...]) -> list[int]:
    """The ids of the single-byte tokens for ``data`` (byte-level BPE's alphabet)."""
    table = bytes_to_unicode()
    return [tok.token_to_id(table[b]) for b in data]


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte to printable-character map, which ByteLevel pre-tokenizers use."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs, strict=True)}


def random_weights(
    vocab: int, zero_rows: list[int], dash_ids: list[int], seed: int
) -> dict[str, np.ndarray]:
    """Llama parameter tensors by their Hugging Face names: random, with two designs.

    Draws are normal(0, 0.02); the layers' output projections are ten times
    smaller, so the last hidden state is mostly the current token's embedding
    (a bigram model, in effect). That makes two things designable:

    - special tokens' output rows are zero, so greedy decoding never picks
      them (replies always run to ``max_tokens``, ``ignore_eos`` or not);
    - residual dims 0..2 are reserved: one ordinary token in ``DASH_EVERY``
      carries dim 0, whose output row is the em dash's first byte; that byte
      carries dim 1, pointing at the second byte, which points at the third.
      So replies contain em dashes, spelt as three byte tokens.
    """
    rng = np.random.default_rng(seed)

    def normal(*shape: int, std: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    head_dim = HIDDEN // HEADS
    embed = normal(vocab, HIDDEN)
    lm_head = normal(vocab, HIDDEN)
    embed[:, :MARKERS] = 0.0
    lm_head[:, :MARKERS] = 0.0
    lm_head[zero_rows] = 0.0
    specials = set(zero_rows) | set(dash_ids)
    starters = [i for i in range(vocab) if i not in specials and i % DASH_EVERY == 0]
    embed[starters, 0] = 0.2
    for dim, (src, dst) in enumerate(zip([None, *dash_ids], dash_ids, strict=False)):
        if src is not None:
            embed[src, dim] = 0.2
        lm_head[dst] = 0.0
        lm_head[dst, dim] = 1.0
    w: dict[str, np.ndarray] = {"model.embed_tokens.weight": embed}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        w[p + "self_attn.q_proj.weight"] = normal(HEADS * head_dim, HIDDEN)
        w[p + "self_attn.k_proj.weight"] = normal(KV_HEADS * head_dim, HIDDEN)
        w[p + "self_attn.v_proj.weight"] = normal(KV_HEADS * head_dim, HIDDEN)
        w[p + "self_attn.o_proj.weight"] = normal(HIDDEN, HEADS * head_dim, std=0.002)
        w[p + "mlp.gate_proj.weight"] = normal(INTERMEDIATE, HIDDEN)
        w[p + "mlp.up_proj.weight"] = normal(INTERMEDIATE, HIDDEN)
        w[p + "mlp.down_proj.weight"] = normal(HIDDEN, INTERMEDIATE, std=0.002)
        w[p + "input_layernorm.weight"] = np.ones(HIDDEN, dtype=np.float32)
        w[p + "post_attention_layernorm.weight"] = np.ones(HIDDEN, dtype=np.float32)
    w["model.norm.weight"] = np.ones(HIDDEN, dtype=np.float32)
    w["lm_head.weight"] = lm_head
    return w


def build(out: Path, corpus: Path) -> dict[str, object]:
    """Write the model folder; returns a summary (sizes, ids) for the log."""
    out.mkdir(parents=True, exist_ok=True)
    text = corpus.read_text("utf-8")
    texts = [text, generated_text(SEED), shuffled_words(text, SEED, 4000)]
    tok = train_tokenizer(texts)
    tok.save(str(out / "tokenizer.json"))
    vocab = tok.get_vocab_size()
    ids = {s: tok.token_to_id(s) for s in SPECIALS}
    eos_ids = [ids[EOS], ids[EOT]]
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": BOS,
                "eos_token": EOT,
                "pad_token": EOS,
                "model_max_length": MAX_POSITIONS,
                "clean_up_tokenization_spaces": False,
                "chat_template": CHAT_TEMPLATE,
                "model_input_names": ["input_ids", "attention_mask"],
            },
            indent=2,
        )
        + "\n"
    )
    (out / "special_tokens_map.json").write_text(
        json.dumps({"bos_token": BOS, "eos_token": EOT, "pad_token": EOS}, indent=2) + "\n"
    )
    (out / "config.json").write_text(
        json.dumps(llama_config(vocab, ids[BOS], eos_ids), indent=2) + "\n"
    )
    (out / "generation_config.json").write_text(
        json.dumps(
            {"bos_token_id": ids[BOS], "eos_token_id": eos_ids, "do_sample": False}, indent=2
        )
        + "\n"
    )
    dash_ids = byte_token_ids(tok, EM_DASH_BYTES)
    weights = random_weights(vocab, sorted(ids.values()), dash_ids, SEED)
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    size = sum(f.stat().st_size for f in out.iterdir())
    return {
        "dir": str(out),
        "vocab": vocab,
        "special_ids": ids,
        "em_dash_ids": dash_ids,
        "bytes": size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    args = parser.parse_args()
    print(json.dumps(build(args.out, args.corpus)))


if __name__ == "__main__":
    main()
