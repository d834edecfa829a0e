"""Synthetic workloads: prompts of chosen lengths cut from real text.

``synthetic`` takes explicit lengths; ``synthetic-uniform`` is the
methodology draft's standard uniform mix (input 128-512, output 64-256).
An input length is what the server counts: the prompt's content gets it
less the tokens the server adds around a prompt (:mod:`.budget`).

Both take ``images=N, image_size=(W, H), image_format="png"|"jpeg"``
(seeded synthetic images with each prompt, :mod:`.images`) and, for the
embeddings API, ``inputs_per_request=K``: the sample's ``inputs`` are ``K``
texts cut the same way, each of a length drawn from ``input_tokens`` (one
draw per input; a fixed length makes them all equal), distinct within the
request; the sample's ``input_tokens`` is their total and its ``prompt`` the
first. Without ``inputs_per_request`` a sample is exactly what it was before
these parameters existed (the same draws), so seeded runs stay comparable.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.base import Sample, register_workload
from pytest_llmperf.workloads.budget import content_tokens, describe_overhead
from pytest_llmperf.workloads.corpus import Corpus, default_corpus
from pytest_llmperf.workloads.images import (
    DEFAULT_IMAGE_FORMAT,
    DEFAULT_IMAGE_SIZE,
    ImageSpec,
    image_spec,
)
from pytest_llmperf.workloads.params import (
    TokenRange,
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

__all__ = [
    "SyntheticWorkload",
    "describe_inputs",
    "distinct_windows",
    "inputs_per_request",
    "prompt_media",
]

REDRAWS = 16  # tries for a start whose window no other input of the request has


def inputs_per_request(value: Any, images: ImageSpec) -> int | None:
    """``inputs_per_request=`` checked: ``None`` (not an embeddings workload) or >= 1."""
    if value is None:
        return None
    k = positive_int("inputs_per_request", value)
    if images.count:
        raise LlmPerfUsageError(
            f"inputs_per_request={value!r} (embeddings texts) and images={images.count!r} "
            "(chat-like prompts) do not go together"
        )
    return k


def prompt_media(
    images: Any, image_size: Any, image_format: Any, inputs: Any
) -> tuple[ImageSpec, int | None]:
    """The image and embeddings-input parameters of a synthetic workload, checked."""
    spec = image_spec(images, image_size, image_format)
    return spec, inputs_per_request(inputs, spec)


def distinct_windows(
    tokenizer: Tokenizer,
    corpus: Corpus,
    rng: random.Random,
    first: str,
    lengths: list[int],
    overhead: int,
) -> tuple[str, ...]:
    """``first`` and one window per further length, no two equal where the corpus allows.

    Each further window starts at a fresh seeded place; a start whose window
    another input already has (a tokenizer snapping to the same word, a tiny
    corpus) is drawn again, up to :data:`REDRAWS` times.
    """
    out = [first]
    seen = {first}
    for n in lengths:
        text = ""
        for _ in range(REDRAWS):
            text = tokenizer.window(corpus, rng.randrange(len(corpus)), content_tokens(n, overhead))
            if text not in seen:
                break
        seen.add(text)
        out.append(text)
    return tuple(out)


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
    images: ImageSpec = field(default_factory=ImageSpec)
    inputs_per_request: int | None = None  # embeddings: texts per request

    def sample(self, index: int) -> Sample:
        rng = random.Random(f"{self.seed}:{index}")
        n_in = rng.randint(*self.input_tokens)
        n_out = rng.randint(*self.output_tokens)
        start = rng.randrange(len(self.corpus))
        prompt = self.tokenizer.window(self.corpus, start, content_tokens(n_in, self.overhead))
        inputs: tuple[str, ...] = ()
        total = n_in
        if self.inputs_per_request is not None:
            more = [rng.randint(*self.input_tokens) for _ in range(self.inputs_per_request - 1)]
            inputs = distinct_windows(self.tokenizer, self.corpus, rng, prompt, more, self.overhead)
            total += sum(more)
        return Sample(
            index=index,
            prompt=prompt,
            input_tokens=total,
            max_tokens=n_out,
            extra_body=self.controls,
            images=self.images.images(self.seed, index),
            inputs=inputs,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seed": self.seed,
            "input_tokens": list(self.input_tokens),
            "output_tokens": list(self.output_tokens),
            "output_control": "max_tokens" + ("" if self.controls else " + ignore_eos"),
            **describe_tokenizer(self.tokenizer),
            **describe_overhead(self.overhead, self.input_tokens[0]),
            **self.images.describe(),
            **describe_inputs(self.inputs_per_request),
        }


def describe_inputs(k: int | None) -> dict[str, Any]:
    """The ``describe()`` entries of ``inputs_per_request`` (none when unset)."""
    if k is None:
        return {}
    return {
        "inputs_per_request": k,
        "input_tokens_per": "input (a request's input_tokens is the sum over its inputs)",
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
        images: Any = 0,
        image_size: Any = DEFAULT_IMAGE_SIZE,
        image_format: Any = DEFAULT_IMAGE_FORMAT,
        inputs_per_request: Any = None,
    ) -> SyntheticWorkload:
        pictures, inputs = prompt_media(images, image_size, image_format, inputs_per_request)
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
            images=pictures,
            inputs_per_request=inputs,
        )

    factory.__name__ = factory.__qualname__ = name.replace("-", "_")  # named in usage errors
    return register_workload(name)(factory)


synthetic = _named("synthetic", 128, 64)
# the methodology draft's standard uniform mix
synthetic_uniform = _named("synthetic-uniform", (128, 512), (64, 256))
