"""What a workload is: a deterministic, lazily built sequence of samples.

Every sample is a pure function of ``(workload parameters, seed, index)``, so
a run can be repeated request for request (the methodology's comparisons need
the same requests in the same order), and a 200,000-request run never holds
200,000 prompts in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.output_contract import OutputContract

__all__ = [
    "REQUEST_PATH_PARAMS",
    "WORKLOADS",
    "ImageInput",
    "RequestPathsHook",
    "Sample",
    "Workload",
    "build_workload",
    "register_request_paths",
    "register_workload",
    "workload_names",
]


@dataclass(frozen=True, slots=True)
class ImageInput:
    """One image of a prompt, encoded once, as it goes on the wire.

    ``data`` is the file's bytes in base64 (no ``data:`` prefix): the Messages
    API sends it so, with ``media_type``; chat and Responses send
    :attr:`data_url`. ``nbytes`` is the encoded file's size before base64 (what
    the report's image bytes count); ``width``/``height`` in pixels (what the
    simulator charges image tokens by).
    """

    data: str
    media_type: str  # "image/png" | "image/jpeg"
    width: int
    height: int
    nbytes: int

    @property
    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.data}"


@dataclass(frozen=True, slots=True)
class Sample:
    """One request to send.

    ``prompt`` is the text of the last user turn (the whole prompt for the
    completions API); ``history`` holds earlier chat turns for multi-turn
    workloads. ``input_tokens`` is the requested input length: what the
    server should count (``usage.prompt_tokens``) by the workload's tokenizer,
    chat template or BOS included when the tokenizer knows them (the server's
    ``usage`` is authoritative when it reports one).
    ``category`` labels the request class for per-class analyses.
    ``headers`` are extra HTTP headers for this request only (a session's
    affinity header, say).
    ``images`` go with the last user turn, after its text (chat, Responses,
    Messages: ``llm_workload(images=N, ...)`` or a trace row's files).
    ``inputs`` are the texts of one embeddings request (``inputs_per_request=``);
    empty for every other API, whose text is ``prompt``. For an embeddings sample
    ``input_tokens`` is the total over its inputs.
    """

    index: int
    prompt: str
    input_tokens: int
    max_tokens: int
    history: tuple[Mapping[str, str], ...] = ()
    category: str = ""
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    images: tuple[ImageInput, ...] = ()
    inputs: tuple[str, ...] = ()
    model: str | None = None
    contract: OutputContract | None = None

    def messages(self) -> list[dict[str, str]]:
        return [*map(dict, self.history), {"role": "user", "content": self.prompt}]


@runtime_checkable
class Workload(Protocol):
    """A named, seeded source of samples.

    ``size`` is the number of distinct samples when the workload is finite
    (a dataset file) and ``None`` when any index is valid (synthetic).
    ``describe()`` is what the report prints: name, parameters and seed.
    """

    @property
    def name(self) -> str: ...

    @property
    def seed(self) -> int: ...

    @property
    def size(self) -> int | None: ...

    def sample(self, index: int) -> Sample: ...

    def describe(self) -> dict[str, Any]: ...


WorkloadFactory = Callable[..., Workload]
WORKLOADS: dict[str, WorkloadFactory] = {}


_Factory = TypeVar("_Factory", bound=WorkloadFactory)


def register_workload(name: str) -> Callable[[_Factory], _Factory]:
    """Register a factory ``f(seed=..., **params) -> Workload`` under ``name``."""

    def decorate(factory: _Factory) -> _Factory:
        WORKLOADS[name] = factory
        return factory

    return decorate


def workload_names() -> list[str]:
    return sorted(WORKLOADS)


# The parameters every workload takes through its wrapper, not its factory
# (:mod:`.request_paths`): which request paths its samples take.
REQUEST_PATH_PARAMS = ("structured", "tools", "tool_choice", "adapters", "greedy")

# ``(workload name, seed, the REQUEST_PATH_PARAMS given)`` -> a wrapper of the built workload,
# or None when they ask for nothing. Registered by :mod:`.request_paths` when the package is
# imported (as the workloads register themselves), so this module imports none of the
# session machinery the wrapper needs.
RequestPathsHook = Callable[[str, int, Mapping[str, Any]], Callable[[Workload], Workload] | None]
_request_paths: list[RequestPathsHook] = []


def register_request_paths(hook: RequestPathsHook) -> RequestPathsHook:
    """Make ``hook`` the one that checks and applies the request-path parameters."""
    _request_paths[:] = [hook]
    return hook


def build_workload(name: str, *, seed: int = 0, **params: Any) -> Workload:
    """The workload ``name`` with ``params``; bad names or values are usage errors.

    ``structured=``, ``tools=``, ``tool_choice=``, ``adapters=`` and ``greedy=``
    are taken here, for every workload: checked before the workload is built
    (a bad schema fails fast, whatever the workload costs to build), then the
    built workload is wrapped so its samples carry them
    (:class:`~.request_paths.RequestPathsWorkload`). Without any of them the
    workload is returned as its factory built it.
    """
    try:
        factory = WORKLOADS[name]
    except KeyError:
        raise LlmPerfUsageError(
            f"unknown workload {name!r}; known workloads: {', '.join(workload_names())}"
        ) from None
    given = {k: params.pop(k) for k in REQUEST_PATH_PARAMS if k in params}
    wrap = None
    if given:
        if not _request_paths:  # pragma: no cover - the package's import registers it
            raise RuntimeError("no request-paths hook: import pytest_llmperf.workloads")
        wrap = _request_paths[0](name, seed, given)
    try:
        workload = factory(seed=seed, **params)
    except TypeError as exc:
        # An unexpected keyword: name it rather than show the factory's signature.
        raise LlmPerfUsageError(f"workload {name!r}: {exc}") from None
    return workload if wrap is None else wrap(workload)
