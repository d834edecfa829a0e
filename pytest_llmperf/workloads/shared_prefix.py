"""``shared-prefix`` (alias ``code-completion``): requests that reuse a few long prefixes.

The draft's code-completion workload: ``n_prefixes`` repository contexts
(default 10, each 512-1024 tokens), a ``sharing_fraction`` of requests
(default 80%) starting with one of them, picked by a Zipf law with exponent
``zipf_s`` (default 1.5: the first context is by far the most popular), then
a request-specific suffix; output lengths log-normal (mu=4.0, sigma=1.5,
clamped to 16-2048). Requests are labelled ``shared`` or ``unique`` for the
prefix-cache analysis. A request's input length is its prefix's tokens plus
its ``suffix_tokens`` draw, as the server counts them: the suffix's text gets
the draw less the separator and what the server adds around a prompt.
Content is prose from the bundled corpus (no code dataset ships with the
package): a prefix cache sees the same token reuse.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.base import Sample, register_workload
from pytest_llmperf.workloads.budget import content_tokens, describe_overhead, joint_cost
from pytest_llmperf.workloads.corpus import Corpus, default_corpus
from pytest_llmperf.workloads.lengths import LogNormalLength, log_normal_length
from pytest_llmperf.workloads.params import (
    TokenRange,
    fraction,
    output_controls,
    positive_int,
    token_range,
)
from pytest_llmperf.workloads.tokenizer import (
    Tokenizer,
    describe_tokenizer,
    framing_tokens,
    resolve_tokenizer,
)

__all__ = ["CODE_OUTPUT", "SharedPrefixWorkload", "zipf_weights"]

CODE_OUTPUT = LogNormalLength(mu=4.0, sigma=1.5, floor=16, cap=2048)
SEPARATOR = "\n\n"  # between a shared prefix and its request's suffix


def zipf_weights(n: int, s: float) -> list[float]:
    """Normalised Zipf probabilities of ranks 1..n: ``k**-s / sum``."""
    raw = [k**-s for k in range(1, n + 1)]
    total = sum(raw)
    return [w / total for w in raw]


@dataclass(frozen=True)
class SharedPrefixWorkload:
    """Zipf-chosen shared prefixes followed by per-request suffixes."""

    name: str
    seed: int
    n_prefixes: int
    prefix_tokens: TokenRange
    sharing_fraction: float
    zipf_s: float
    suffix_tokens: TokenRange
    output_dist: LogNormalLength
    tokenizer: Tokenizer
    corpus: Corpus
    controls: Mapping[str, Any] = field(default_factory=dict)
    size: int | None = None
    overhead: int = 0  # tokens the server adds around the prompt (chat template, BOS)
    separator_tokens: int = 0  # what SEPARATOR costs between two windows

    @cached_property
    def prefixes(self) -> tuple[str, ...]:
        """The shared contexts; ``prefixes[0]`` is the most popular."""
        out = []
        for k in range(self.n_prefixes):
            rng = random.Random(f"{self.seed}:prefix:{k}")
            n = rng.randint(*self.prefix_tokens)
            out.append(self.tokenizer.window(self.corpus, rng.randrange(len(self.corpus)), n))
        return tuple(out)

    @cached_property
    def prefix_tokens_of(self) -> tuple[int, ...]:
        """Each prefix's token count (measured once: an exact window may fall short)."""
        return tuple(self.tokenizer.count(p) for p in self.prefixes)

    @cached_property
    def _weights(self) -> list[float]:
        return zipf_weights(self.n_prefixes, self.zipf_s)

    def prefix_of(self, index: int) -> int | None:
        """Which prefix sample ``index`` uses (``None`` = no shared prefix)."""
        rng = random.Random(f"{self.seed}:{index}")
        if rng.random() >= self.sharing_fraction:
            return None
        return rng.choices(range(self.n_prefixes), weights=self._weights)[0]

    def sample(self, index: int) -> Sample:
        prefix_id = self.prefix_of(index)
        rng = random.Random(f"{self.seed}:{index}:body")
        n_suffix = rng.randint(*self.suffix_tokens)
        start = rng.randrange(len(self.corpus))
        if prefix_id is None:
            n_text = content_tokens(n_suffix, self.overhead)
            prompt = self.tokenizer.window(self.corpus, start, n_text)
            input_tokens = n_suffix
        else:
            n_text = content_tokens(n_suffix, self.overhead + self.separator_tokens)
            suffix = self.tokenizer.window(self.corpus, start, n_text)
            prompt = f"{self.prefixes[prefix_id]}{SEPARATOR}{suffix}"
            input_tokens = self.prefix_tokens_of[prefix_id] + n_suffix
        return Sample(
            index=index,
            prompt=prompt,
            input_tokens=input_tokens,
            max_tokens=self.output_dist.draw(rng),
            category="unique" if prefix_id is None else "shared",
            extra_body=self.controls,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seed": self.seed,
            "n_prefixes": self.n_prefixes,
            "prefix_tokens": list(self.prefix_tokens),
            "sharing_fraction": self.sharing_fraction,
            "prefix_choice": f"Zipf s={self.zipf_s:g}",
            "suffix_tokens": list(self.suffix_tokens),
            "output_tokens": self.output_dist.describe(),
            "output_control": "max_tokens" + ("" if self.controls else " + ignore_eos"),
            "content": "prose from the bundled corpus",
            **describe_tokenizer(self.tokenizer),
            **describe_overhead(
                self.overhead + self.separator_tokens * (self.sharing_fraction > 0),
                self.suffix_tokens[0],
            ),
        }


def _build(name: str, seed: int, **params: Any) -> SharedPrefixWorkload:
    zipf_s = params["zipf_s"]
    if isinstance(zipf_s, bool) or not isinstance(zipf_s, (int, float)) or zipf_s < 0:
        raise LlmPerfUsageError(f"zipf_s must be a number >= 0, got {zipf_s!r}")
    tok = resolve_tokenizer(params["tokenizer"])
    return SharedPrefixWorkload(
        name=name,
        seed=seed,
        n_prefixes=positive_int("n_prefixes", params["n_prefixes"]),
        prefix_tokens=token_range("prefix_tokens", params["prefix_tokens"]),
        sharing_fraction=fraction("sharing_fraction", params["sharing_fraction"]),
        zipf_s=float(zipf_s),
        suffix_tokens=token_range("suffix_tokens", params["suffix_tokens"]),
        output_dist=log_normal_length("output_tokens", params["output_tokens"], CODE_OUTPUT),
        tokenizer=tok,
        corpus=default_corpus(),
        controls=output_controls(params["ignore_eos"]),
        overhead=framing_tokens(tok, ("user",)),
        separator_tokens=joint_cost(tok, [None, SEPARATOR, None]),
    )


def _named(name: str, doc: str) -> Callable[..., SharedPrefixWorkload]:
    """One factory per registered name: ``code-completion`` is the draft's name for it."""

    def factory(
        *,
        seed: int = 0,
        n_prefixes: Any = 10,
        prefix_tokens: Any = (512, 1024),
        sharing_fraction: Any = 0.8,
        zipf_s: Any = 1.5,
        suffix_tokens: Any = (64, 256),
        output_tokens: Any = None,
        ignore_eos: Any = True,
        tokenizer: Any = None,
    ) -> SharedPrefixWorkload:
        params = dict(locals())
        for key in ("seed", "name", "doc"):
            params.pop(key, None)
        return _build(name, seed, **params)

    factory.__doc__ = doc
    factory.__name__ = factory.__qualname__ = name.replace("-", "_")  # named in usage errors
    return register_workload(name)(factory)


shared_prefix = _named(
    "shared-prefix", '``output_tokens`` overrides log-normal keys, e.g. ``{"cap": 256}``.'
)
code_completion = _named(
    "code-completion", "The draft's name for ``shared-prefix``, same parameters."
)
