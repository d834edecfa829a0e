"""``long-context``: a long document followed by a question, at target total lengths.

The draft's long-context workload: each request's input is ``[document]
[question]`` with the document filling the target length minus the
question (~100 tokens), the target drawn uniformly from ``context_tokens``
(default the draft's 8192-131072 list; pass one length, or a shorter list
for servers with smaller context windows), and a fixed output of 256 tokens.
Samples are labelled with their target length (``"8192"``), so the
long-context scaling analysis can group by it. The target is what the server
counts: the document gets it less the header, the question, their
junctions and what the server adds around a prompt (chat template, BOS).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.base import Sample, register_workload
from pytest_llmperf.workloads.budget import content_tokens, describe_overhead, joint_cost
from pytest_llmperf.workloads.corpus import Corpus, default_corpus
from pytest_llmperf.workloads.params import output_controls, positive_int
from pytest_llmperf.workloads.tokenizer import (
    Tokenizer,
    describe_tokenizer,
    framing_tokens,
    resolve_tokenizer,
)

__all__ = ["DRAFT_CONTEXT_TOKENS", "QUESTION", "LongContextWorkload"]

HEADER = "Document:"
DRAFT_CONTEXT_TOKENS = (8192, 16384, 32768, 65536, 131072)
QUESTION = Corpus(
    "Question: read the document above carefully and answer in plain prose. "
    "Which people, places and events does it describe, in what order do they "
    "appear, and what changes between the first part and the last part? Quote "
    "the sentence that best supports your answer, explain why you chose it, "
    "and say which details you found hard to reconcile, if any. Keep the "
    "answer focused on the document rather than on outside knowledge, and "
    "finish with a one-sentence summary of its main point."
)


@dataclass(frozen=True)
class LongContextWorkload:
    """Document + question prompts of exact target token counts."""

    seed: int
    context_tokens: tuple[int, ...]
    question_tokens: int
    output_tokens: int
    tokenizer: Tokenizer
    corpus: Corpus
    controls: Mapping[str, Any] = field(default_factory=dict)
    name: str = "long-context"
    size: int | None = None
    overhead: int = 0  # tokens the server adds around the prompt (chat template, BOS)

    @cached_property
    def question(self) -> str:
        """About ``question_tokens`` of the question (an exact window may start later in it)."""
        text = self.tokenizer.window(QUESTION, 0, self.question_tokens)
        return text if text.startswith("Question:") else f"Question: {text}"

    @cached_property
    def around_document(self) -> int:
        """Tokens of everything but the document: header, question, junctions, framing."""
        parts = [f"{HEADER}\n", None, f"\n\n{self.question}"]
        return joint_cost(self.tokenizer, parts, self.corpus) + self.overhead

    def sample(self, index: int) -> Sample:
        rng = random.Random(f"{self.seed}:{index}")
        target = rng.choice(self.context_tokens)
        n_doc = content_tokens(target, self.around_document)
        document = self.tokenizer.window(self.corpus, rng.randrange(len(self.corpus)), n_doc)
        prompt = f"{HEADER}\n{document}\n\n{self.question}"
        return Sample(
            index=index,
            prompt=prompt,
            input_tokens=target,
            max_tokens=self.output_tokens,
            category=str(target),
            extra_body=self.controls,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seed": self.seed,
            "context_tokens": list(self.context_tokens),
            "context_choice": "uniform over the target lengths",
            "structure": "[document][question]",
            "question_tokens": self.question_tokens,
            "output_tokens": self.output_tokens,
            "output_control": "max_tokens" + ("" if self.controls else " + ignore_eos"),
            **describe_tokenizer(self.tokenizer),
            **describe_overhead(self.overhead, min(self.context_tokens)),
        }


@register_workload("long-context")
def long_context(
    *,
    seed: int = 0,
    context_tokens: Any = DRAFT_CONTEXT_TOKENS,
    question_tokens: Any = 100,
    output_tokens: Any = 256,
    ignore_eos: Any = True,
    tokenizer: Any = None,
) -> LongContextWorkload:
    """``context_tokens``: one total input length or a list of them (each > question_tokens + 8)."""
    n_question = positive_int("question_tokens", question_tokens)
    lengths = context_tokens if isinstance(context_tokens, (list, tuple)) else [context_tokens]
    if not lengths:
        raise LlmPerfUsageError("context_tokens must name at least one length")
    checked = tuple(positive_int("context_tokens", n) for n in lengths)
    too_short = [n for n in checked if n < n_question + 8]
    if too_short:
        raise LlmPerfUsageError(
            f"context_tokens {too_short} leave no room for a document after the "
            f"{n_question}-token question (need >= {n_question + 8})"
        )
    tok = resolve_tokenizer(tokenizer)
    return LongContextWorkload(
        seed=seed,
        context_tokens=checked,
        question_tokens=n_question,
        output_tokens=positive_int("output_tokens", output_tokens),
        tokenizer=tok,
        corpus=default_corpus(),
        controls=output_controls(ignore_eos),
        overhead=framing_tokens(tok, ("user",)),
    )
