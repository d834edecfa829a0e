"""Synthetic workloads: prompts of chosen lengths cut from real text.

``synthetic`` takes explicit lengths; ``synthetic-uniform`` is the
methodology draft's standard uniform mix (input 128-512, output 64-256).
An input length is what the server counts: the prompt's content gets it
less the tokens the server adds around a prompt (:mod:`.budget`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.workloads.base import Sample, register_workload
from pytest_llmperf.workloads.budget import content_tokens, describe_overhead
from pytest_llmperf.workloads.corpus import Corpus, default_corpus
from pytest_llmperf.workloads.params import TokenRange, output_controls, token_range
from pytest_llmperf.workloads.tokenizer import Tokenizer, framing_tokens, resolve_tokenizer

__all__ = ["SyntheticWorkload"]


@dataclass(frozen=True)
class SyntheticWorkload:
    """Uniformly drawn input and output lengths; any index is a valid sample.

    Each sample draws from its own ``random.Random((seed, index))`` stream, so
    sample ``i`` is the same whatever order samples are requested in.
    """

    name: str
    seed: int
    input_tokens: TokenRange
    output_tokens: TokenRange
    corpus: Corpus
    tokenizer: Tokenizer
    controls: Mapping[str, Any] = field(default_factory=dict)
    size: int | None = None
    overhead: int = 0  # tokens the server adds around the prompt (chat template, BOS)

    def sample(self, index: int) -> Sample:
        rng = random.Random(f"{self.seed}:{index}")
        n_in = rng.randint(*self.input_tokens)
        n_out = rng.randint(*self.output_tokens)
        start = rng.randrange(len(self.corpus))
        prompt = self.tokenizer.window(self.corpus, start, content_tokens(n_in, self.overhead))
        return Sample(
            index=index,
            prompt=prompt,
            input_tokens=n_in,
            max_tokens=n_out,
            extra_body=self.controls,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seed": self.seed,
            "input_tokens": list(self.input_tokens),
            "output_tokens": list(self.output_tokens),
            "output_control": "max_tokens" + ("" if self.controls else " + ignore_eos"),
            "tokenizer": self.tokenizer.label,
            **describe_overhead(self.overhead, self.input_tokens[0]),
        }


def _named(name: str, input_tokens: Any, output_tokens: Any) -> Callable[..., SyntheticWorkload]:
    """A registered factory whose default lengths are ``input_tokens``/``output_tokens``."""
    default_in, default_out = input_tokens, output_tokens

    def factory(
        *,
        seed: int = 0,
        input_tokens: Any = default_in,
        output_tokens: Any = default_out,
        ignore_eos: Any = True,
        tokenizer: Any = None,
    ) -> SyntheticWorkload:
        tok = resolve_tokenizer(tokenizer)
        return SyntheticWorkload(
            name=name,
            seed=seed,
            input_tokens=token_range("input_tokens", input_tokens),
            output_tokens=token_range("output_tokens", output_tokens),
            corpus=default_corpus(),
            tokenizer=tok,
            controls=output_controls(ignore_eos),
            overhead=framing_tokens(tok, ("user",)),
        )

    factory.__name__ = factory.__qualname__ = name.replace("-", "_")  # named in usage errors
    return register_workload(name)(factory)


synthetic = _named("synthetic", 128, 64)
# the methodology draft's standard uniform mix
synthetic_uniform = _named("synthetic-uniform", (128, 512), (64, 256))
