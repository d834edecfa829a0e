"""``synthetic-skewed``: the draft's high-variance length mix, and its fairness classes.

By default input and output lengths are log-normal as in the draft's
appendix (input mu=5.5, sigma=1.0, floor 32, cap 4096; output mu=4.5,
sigma=1.2, floor 16, cap 2048), and each sample is labelled ``short``
(input < 256), ``medium`` or ``long`` (input >= 1024) so per-class analyses
work on it unchanged. ``class_mix={"short": 0.8, "long": 0.2}`` instead draws
each request's class by weight and its lengths uniformly from the class's
ranges: the draft's scheduling-fairness classes (short: input 64-256,
output 32-128; long: input 1024-4096, output 256-1024) unless ``classes=``
redefines them.

Like ``synthetic`` it takes ``images=``, ``image_size=``, ``image_format=``
and ``inputs_per_request=`` (each further input draws its own length from the
sample's class, or the log-normal; the category is the first input's).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.base import Sample, register_workload
from pytest_llmperf.workloads.budget import content_tokens, describe_overhead
from pytest_llmperf.workloads.corpus import Corpus, default_corpus
from pytest_llmperf.workloads.images import DEFAULT_IMAGE_FORMAT, DEFAULT_IMAGE_SIZE, ImageSpec
from pytest_llmperf.workloads.lengths import LogNormalLength, log_normal_length
from pytest_llmperf.workloads.params import TokenRange, output_controls, token_range
from pytest_llmperf.workloads.synthetic import describe_inputs, distinct_windows, prompt_media
from pytest_llmperf.workloads.tokenizer import (
    Tokenizer,
    describe_tokenizer,
    framing_tokens,
    resolve_tokenizer,
)

__all__ = [
    "FAIRNESS_CLASSES",
    "SKEWED_INPUT",
    "SKEWED_OUTPUT",
    "LengthClass",
    "SkewedWorkload",
    "length_class",
]

SKEWED_INPUT = LogNormalLength(mu=5.5, sigma=1.0, floor=32, cap=4096)
SKEWED_OUTPUT = LogNormalLength(mu=4.5, sigma=1.2, floor=16, cap=2048)
SHORT_BELOW = 256
LONG_FROM = 1024


@dataclass(frozen=True)
class LengthClass:
    """A request class of the fairness test: its input and output length ranges."""

    input_tokens: TokenRange
    output_tokens: TokenRange


FAIRNESS_CLASSES: dict[str, LengthClass] = {
    "short": LengthClass((64, 256), (32, 128)),
    "long": LengthClass((1024, 4096), (256, 1024)),
}


def length_class(input_tokens: int) -> str:
    """The class label of a log-normal draw: ``short``, ``medium`` or ``long``."""
    if input_tokens < SHORT_BELOW:
        return "short"
    return "long" if input_tokens >= LONG_FROM else "medium"


@dataclass(frozen=True)
class SkewedWorkload:
    """Log-normal lengths, or a weighted mix of length classes when ``mix`` is set."""

    seed: int
    input_dist: LogNormalLength
    output_dist: LogNormalLength
    mix: tuple[tuple[str, float], ...]
    classes: Mapping[str, LengthClass]
    tokenizer: Tokenizer
    corpus: Corpus
    controls: Mapping[str, Any] = field(default_factory=dict)
    name: str = "synthetic-skewed"
    size: int | None = None
    overhead: int = 0  # tokens the server adds around the prompt (chat template, BOS)
    images: ImageSpec = field(default_factory=ImageSpec)
    inputs_per_request: int | None = None  # embeddings: texts per request

    def sample(self, index: int) -> Sample:
        rng = random.Random(f"{self.seed}:{index}")
        cls: LengthClass | None = None
        if self.mix:
            names = [name for name, _ in self.mix]
            category = rng.choices(names, weights=[w for _, w in self.mix])[0]
            cls = self.classes[category]
            n_in = rng.randint(*cls.input_tokens)
            n_out = rng.randint(*cls.output_tokens)
        else:
            n_in = self.input_dist.draw(rng)
            n_out = self.output_dist.draw(rng)
            category = length_class(n_in)
        start = rng.randrange(len(self.corpus))
        prompt = self.tokenizer.window(self.corpus, start, content_tokens(n_in, self.overhead))
        inputs: tuple[str, ...] = ()
        total = n_in
        if self.inputs_per_request is not None:
            more = [
                rng.randint(*cls.input_tokens) if cls is not None else self.input_dist.draw(rng)
                for _ in range(self.inputs_per_request - 1)
            ]
            inputs = distinct_windows(self.tokenizer, self.corpus, rng, prompt, more, self.overhead)
            total += sum(more)
        return Sample(
            index=index,
            prompt=prompt,
            input_tokens=total,
            max_tokens=n_out,
            category=category,
            extra_body=self.controls,
            images=self.images.images(self.seed, index),
            inputs=inputs,
        )

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "seed": self.seed}
        if self.mix:
            out["class_mix"] = dict(self.mix)
            out["classes"] = {
                name: {"input_tokens": list(c.input_tokens), "output_tokens": list(c.output_tokens)}
                for name, c in self.classes.items()
                if name in dict(self.mix)
            }
        else:
            out["input_tokens"] = self.input_dist.describe()
            out["output_tokens"] = self.output_dist.describe()
            out["categories"] = f"short < {SHORT_BELOW} <= medium < {LONG_FROM} <= long (input)"
        out["output_control"] = "max_tokens" + ("" if self.controls else " + ignore_eos")
        out.update(describe_tokenizer(self.tokenizer))
        out.update(describe_overhead(self.overhead, self._smallest_input()))
        out.update(self.images.describe())
        out.update(describe_inputs(self.inputs_per_request))
        return out

    def _smallest_input(self) -> int:
        if self.mix:
            return min(self.classes[name].input_tokens[0] for name, _ in self.mix)
        return self.input_dist.floor


def _classes(value: Any) -> dict[str, LengthClass]:
    if value is None:
        return dict(FAIRNESS_CLASSES)
    if not isinstance(value, dict) or not value:
        raise LlmPerfUsageError(
            "classes must be a dict name -> {'input_tokens': (lo, hi), 'output_tokens': (lo, hi)}"
            f", got {value!r}"
        )
    out: dict[str, LengthClass] = {}
    for name, spec in value.items():
        if not isinstance(spec, dict) or set(spec) != {"input_tokens", "output_tokens"}:
            raise LlmPerfUsageError(
                f"classes[{name!r}] needs exactly input_tokens= and output_tokens=, got {spec!r}"
            )
        out[str(name)] = LengthClass(
            token_range(f"classes[{name!r}].input_tokens", spec["input_tokens"]),
            token_range(f"classes[{name!r}].output_tokens", spec["output_tokens"]),
        )
    return out


def _mix(value: Any, classes: Mapping[str, LengthClass]) -> tuple[tuple[str, float], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict) or not value:
        raise LlmPerfUsageError(f"class_mix must be a dict class -> weight, got {value!r}")
    mix: list[tuple[str, float]] = []
    for name, weight in value.items():
        if name not in classes:
            raise LlmPerfUsageError(
                f"class_mix names unknown class {name!r}; classes: {', '.join(classes)}"
            )
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
            raise LlmPerfUsageError(f"class_mix[{name!r}] must be a weight >= 0, got {weight!r}")
        mix.append((name, float(weight)))
    if not sum(w for _, w in mix) > 0:
        raise LlmPerfUsageError(f"class_mix weights must not all be 0, got {value!r}")
    return tuple(mix)


@register_workload("synthetic-skewed")
def synthetic_skewed(
    *,
    seed: int = 0,
    input_tokens: Any = None,
    output_tokens: Any = None,
    class_mix: Any = None,
    classes: Any = None,
    ignore_eos: Any = True,
    tokenizer: Any = None,
    images: Any = 0,
    image_size: Any = DEFAULT_IMAGE_SIZE,
    image_format: Any = DEFAULT_IMAGE_FORMAT,
    inputs_per_request: Any = None,
) -> SkewedWorkload:
    """``input_tokens``/``output_tokens`` override log-normal keys, e.g. ``{"cap": 1500}``."""
    pictures, inputs = prompt_media(images, image_size, image_format, inputs_per_request)
    known = _classes(classes)
    tok = resolve_tokenizer(tokenizer)
    return SkewedWorkload(
        seed=seed,
        input_dist=log_normal_length("input_tokens", input_tokens, SKEWED_INPUT),
        output_dist=log_normal_length("output_tokens", output_tokens, SKEWED_OUTPUT),
        mix=_mix(class_mix, known),
        classes=known,
        tokenizer=tok,
        corpus=default_corpus(),
        controls=output_controls(ignore_eos),
        overhead=framing_tokens(tok, ("user",)),
        images=pictures,
        inputs_per_request=inputs,
    )
