"""The optional request fields a body carries, negotiated per server, and the rules each
format has for them.

Every format's body builder takes a :class:`RequestFields` (what the server accepts of
this project's wishes, and the user's own fields) and ends with :func:`apply_extra`; a
format says which of the optional fields its bodies have at all (its
:class:`FieldRules`), so the report speaks of those only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_llmperf.apis.samples import ContractLike, SampleLike

__all__ = [
    "DEFAULT_FIELDS",
    "EVERY_FIELD",
    "OPTIONAL_FIELDS",
    "FieldRules",
    "RequestFields",
    "apply_extra",
    "apply_output_fields",
    "finish_body",
]

# The optional fields a request may carry, each negotiated at preflight.
OPTIONAL_FIELDS = frozenset({"ignore_eos", "stream_options", "max_tokens"})


@dataclass(frozen=True, slots=True)
class FieldRules:
    """What a format sends of the optional fields (the rest it never sends, so the server
    can neither take nor refuse them), and the field its bodies give the output length in
    (None: it generates nothing). A format that sends ``max_tokens`` as an optional field
    sends the length in the negotiated :attr:`RequestFields.max_tokens_field`."""

    sends: frozenset[str] = OPTIONAL_FIELDS
    length_field: str | None = "max_tokens"


# A format that sends every optional field (chat's rules): the default of the methods below.
EVERY_FIELD = FieldRules()


@dataclass(frozen=True, slots=True)
class RequestFields:
    """What goes into every request body beyond the OpenAI API's required fields.

    ``ignore_eos`` (vLLM, SGLang) with ``max_tokens`` makes a server generate
    the planned output length, and ``stream_options.include_usage`` asks for
    the server's own token counts: both are this project's wishes, not the
    API's, and strict servers (the OpenAI API, ``transformers serve``,
    gateways on pydantic models with ``extra="forbid"``) refuse unknown
    fields. So they are negotiated at preflight
    (:mod:`pytest_llmperf.client.negotiation`) and dropped where refused;
    ``refused`` keeps the server's message for each, for the report.
    ``max_tokens_field`` is ``max_completion_tokens`` where a chat server
    refuses ``max_tokens``. ``extra`` holds the user's own fields
    (``--llm-request-extra``, ``llm_workload(extra_body=...)``), sent as given.
    """

    ignore_eos: bool = True
    include_usage: bool = True
    max_tokens_field: str = "max_tokens"
    extra: Mapping[str, Any] = field(default_factory=dict)
    refused: Mapping[str, str] = field(default_factory=dict)

    def with_extra(self, extra: Mapping[str, Any]) -> RequestFields:
        """These fields with ``extra`` merged over the current user fields."""
        if not extra:
            return self
        return replace(self, extra={**self.extra, **extra})

    def sends(self, rules: FieldRules, name: str) -> bool:
        """Whether a request of a format with ``rules`` carries the optional field ``name``
        (``ignore_eos``, ``stream_options``, ``max_tokens``) with these fields: the format
        must have it at all (the Responses API has no ``stream_options``; embeddings none
        of them), and it must not have been dropped."""
        if name not in rules.sends:
            return False
        if name == "ignore_eos":
            return self.ignore_eos
        if name == "stream_options":
            return self.include_usage
        return self.max_tokens_field == "max_tokens"

    def notes(self, rules: FieldRules = EVERY_FIELD) -> list[str]:
        """What each refusal means for the measurement, in the report's words; only of the
        fields the format sends (nothing is said of a field it never carries)."""
        sends = rules.sends
        length = self.length_field(rules) or "max_tokens"
        out: list[str] = []
        if not self.ignore_eos and "ignore_eos" in sends:
            out.append(
                "server refused ignore_eos: output lengths are the server's "
                f"(the model may stop before {length}); see token_lengths"
            )
        if not self.include_usage and "stream_options" in sends:
            out.append(
                "server refused stream_options.include_usage: output tokens are counted "
                "as streamed token events (token_count_source 'events')"
            )
        if self.max_tokens_field != "max_tokens" and "max_tokens" in sends:
            out.append(f"server refused max_tokens: output length sent as {self.max_tokens_field}")
        return out

    def length_field(self, rules: FieldRules = EVERY_FIELD) -> str | None:
        """The body field that carries the output length (None: a format that generates
        nothing)."""
        if "max_tokens" in rules.sends:
            return self.max_tokens_field
        return rules.length_field

    def describe(self, rules: FieldRules = EVERY_FIELD) -> dict[str, Any]:
        """The report's ``endpoint["request_fields"]``: a field the format never sends is
        ``None`` (neither taken nor refused), ``max_tokens_field`` the format's own."""
        sends = rules.sends
        return {
            "ignore_eos": self.ignore_eos if "ignore_eos" in sends else None,
            "include_usage": self.include_usage if "stream_options" in sends else None,
            "max_tokens_field": self.length_field(rules),
            "extra": sorted(self.extra),
            "refused": {k: v for k, v in self.refused.items() if _refusable(k, sends)},
            "notes": self.notes(rules),
        }


def _refusable(name: str, sends: frozenset[str]) -> bool:
    """Whether a refusal recorded under ``name`` concerns a field the format sends (the
    user's own fields, recorded under other names, always do)."""
    return name in sends or name not in OPTIONAL_FIELDS


DEFAULT_FIELDS = RequestFields()


def apply_output_fields(
    body: dict[str, Any], contract: ContractLike, output: Mapping[str, Any]
) -> None:
    """Put a contract's ``output`` fields into ``body``, before the sample's and the
    user's own (which still win).

    An output that is checked (a schema, tools) goes without ``ignore_eos``: the
    grammar ends the JSON or the call, and a server made to decode past that end
    drives its grammar engine into a state it rejects (vLLM: "grammar rejected",
    vllm-project/vllm#49173); the output length is then the server's, as
    ``token_lengths`` shows. Greedy-only requests keep it (fixed lengths compare).
    """
    body.update(output)
    if contract.checks_output:
        body.pop("ignore_eos", None)


def apply_extra(
    body: dict[str, Any], sample: SampleLike, fields: RequestFields, *, ignore_eos: bool
) -> dict[str, Any]:
    """``body`` with the sample's ``extra_body`` and then the user's fields over it.

    ``ignore_eos``: whether the body may carry ``ignore_eos`` (negotiated, and an
    API that has it); a sample's ``ignore_eos`` goes only where it may, the user's
    own fields always (they are what the user wants measured).
    """
    if sample.extra_body:
        body.update(sample.extra_body)
        if not ignore_eos:
            body.pop("ignore_eos", None)
    if fields.extra:
        body.update(fields.extra)
    return body


def finish_body(
    body: dict[str, Any],
    sample: SampleLike,
    fields: RequestFields,
    output_fields: Callable[[ContractLike], Mapping[str, Any]],
) -> dict[str, Any]:
    """The end of every generating format's body: its contract's fields (``output_fields``
    gives them in the format's own shapes), then the sample's and the user's own fields
    (:func:`apply_extra`, ``ignore_eos`` as negotiated)."""
    if sample.contract is not None:
        apply_output_fields(body, sample.contract, output_fields(sample.contract))
    return apply_extra(body, sample, fields, ignore_eos=fields.ignore_eos)
