"""A tiny byte-level BPE tokenizer, trained here, saved as a Hugging Face folder (no download).

``tokenizer.json`` (GPT-2/Llama-3 style byte-level BPE) with a BOS that the
post-processor adds to single sequences, as Llama 3's does, and a
``tokenizer_config.json`` carrying a Llama-3-like chat template and the
special tokens. ``vocab`` sets how much it merges: a small vocabulary splits
most words into several tokens, which is the hard case for exact windows.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from pytest_llmperf.workloads.corpus import default_corpus

BOS, EOS, EOT = "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"
HEADER_START, HEADER_END = "<|start_header_id|>", "<|end_header_id|>"
SPECIALS = [BOS, EOS, HEADER_START, HEADER_END, EOT]

LLAMA3_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}"
    "{{ message['content'] | trim }}{{ '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}"
)

# ChatML, no BOS anywhere (Qwen-like): completions get nothing added either
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def training_text(seed: int = 7) -> list[str]:
    text = default_corpus().text
    words = text.split()
    rng = random.Random(seed)
    shuffled = " ".join(rng.choice(words) for _ in range(3000))
    extra = "system user assistant Question Document 0123456789 ,.;:!?'\"()-\n\n"
    return [text, shuffled, extra]


def build_tokenizer(
    folder: Path, *, vocab: int = 1200, chatml: bool = False, bos: bool = True
) -> Path:
    """Train and save; returns ``folder`` (tokenizer.json + tokenizer_config.json)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    specials = [*SPECIALS, "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        min_frequency=2,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(training_text(), trainer=trainer)
    steps: list = [processors.ByteLevel(trim_offsets=False)]
    if bos:
        bos_id = tok.token_to_id(BOS)
        steps.append(
            processors.TemplateProcessing(
                single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
            )
        )
    tok.post_processor = processors.Sequence(steps)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None if chatml else BOS,
        "eos_token": "<|im_end|>" if chatml else EOT,
        "chat_template": CHATML_TEMPLATE if chatml else LLAMA3_TEMPLATE,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    return folder
