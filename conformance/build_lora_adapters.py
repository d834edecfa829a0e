"""Build two tiny LoRA adapters for the tier's Llama (``build_tiny_model.py``), with no download.

vLLM serves LoRA adapters from PEFT's on-disk format, which is two files:
``adapter_config.json`` (rank, alpha, target modules) and
``adapter_model.safetensors`` (per target module ``…lora_A.weight`` of shape
``(r, in)`` and ``…lora_B.weight`` of shape ``(out, r)``, under PEFT's
``base_model.model.`` prefix). They are written here directly with numpy and
``safetensors``, as ``peft`` itself would save an adapter of random weights:
no ``peft`` install, no training, the same bytes for the same model.

Unlike a freshly initialised PEFT adapter (``lora_B`` all zero, which would
leave the model's outputs unchanged), both matrices are random, so each
adapter really changes what the model says: a request answered by the base
model instead of the adapter it named gives another output.

Rank 8 on ``q_proj`` and ``v_proj`` (PEFT's default targets for Llama),
``lora_alpha`` 16. The tier serves them with ``--enable-lora --max-loras 2
--max-lora-rank 8 --lora-modules NAME=PATH`` (``conformance/servers.py``).

Usage: ``python build_lora_adapters.py MODEL_DIR OUT_DIR``: writes
``OUT_DIR/tiny-lora-1`` and ``OUT_DIR/tiny-lora-2``; needs numpy and
safetensors (the vLLM venv has them).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file

ADAPTERS = ("tiny-lora-1", "tiny-lora-2")
RANK = 8
ALPHA = 16
TARGETS = ("q_proj", "v_proj")
SEED = 20261128


def adapter_weights(config: dict[str, Any], seed: int) -> dict[str, np.ndarray]:
    """PEFT-named ``lora_A``/``lora_B`` tensors for every layer's targets, float32."""
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads", heads))
    head_dim = int(config.get("head_dim", hidden // heads))
    layers = int(config["num_hidden_layers"])
    out_dims = {"q_proj": heads * head_dim, "v_proj": kv_heads * head_dim}
    rng = np.random.default_rng(seed)
    weights: dict[str, np.ndarray] = {}
    for layer in range(layers):
        for target in TARGETS:
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{target}"
            a = rng.normal(0.0, 1.0 / np.sqrt(hidden), size=(RANK, hidden))
            b = rng.normal(0.0, 0.2, size=(out_dims[target], RANK))
            weights[f"{prefix}.lora_A.weight"] = a.astype(np.float32)
            weights[f"{prefix}.lora_B.weight"] = b.astype(np.float32)
    return weights


def adapter_config(model_dir: Path) -> dict[str, object]:
    """``adapter_config.json`` as PEFT writes it for a plain LoRA (the fields vLLM reads)."""
    return {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": str(model_dir),
        "r": RANK,
        "lora_alpha": ALPHA,
        "lora_dropout": 0.0,
        "target_modules": list(TARGETS),
        "bias": "none",
        "fan_in_fan_out": False,
        "use_rslora": False,
        "use_dora": False,
        "init_lora_weights": True,
        "modules_to_save": None,
        "inference_mode": True,
    }


def build(model_dir: Path, out: Path) -> list[Path]:
    config = json.loads((model_dir / "config.json").read_text())
    made = []
    for i, name in enumerate(ADAPTERS):
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "adapter_config.json").write_text(
            json.dumps(adapter_config(model_dir), indent=2) + "\n"
        )
        save_file(
            adapter_weights(config, SEED + i),
            str(folder / "adapter_model.safetensors"),
            metadata={"format": "pt"},
        )
        made.append(folder)
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    args = parser.parse_args()
    for folder in build(args.model_dir, args.out_dir):
        print(f"adapter: {folder}")


if __name__ == "__main__":
    main()
