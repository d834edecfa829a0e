"""What a workload is: a deterministic, lazily built sequence of samples.

Every sample is a pure function of ``(workload parameters, seed, index)``, so
a run can be repeated request for request (the methodology's comparisons need
the same requests in the same order), and a 200,000-request run never holds
200,000 prompts in memory.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from pytest_llmperf.errors import LlmPerfUsageError, did_you_mean
from pytest_llmperf.workloads.output_contract import OutputContract

__all__ = [
    "RENAMED_PARAMS",
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
    "workload_params",
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
    ``headers`` are extra HTTP headers for this request only (a conversation's
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
# workload name -> {old parameter name: its new name}: spellings kept for one release,
# taken by :func:`build_workload` with a DeprecationWarning, listed nowhere.
RENAMED_PARAMS: dict[str, Mapping[str, str]] = {}


_Factory = TypeVar("_Factory", bound=WorkloadFactory)


def register_workload(
    name: str, *, renamed: Mapping[str, str] | None = None
) -> Callable[[_Factory], _Factory]:
    """Register a factory ``f(seed=..., **params) -> Workload`` under ``name``.

    ``renamed``: ``{old: new}`` parameter names still accepted (and mapped) for one release.
    """

    def decorate(factory: _Factory) -> _Factory:
        WORKLOADS[name] = factory
        if renamed:
            RENAMED_PARAMS[name] = dict(renamed)
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
# conversation machinery the wrapper needs.
RequestPathsHook = Callable[[str, int, Mapping[str, Any]], Callable[[Workload], Workload] | None]
_request_paths: list[RequestPathsHook] = []


def register_request_paths(hook: RequestPathsHook) -> RequestPathsHook:
    """Make ``hook`` the one that checks and applies the request-path parameters."""
    _request_paths[:] = [hook]
    return hook


def workload_params(name: str) -> tuple[str, ...] | None:
    """The keyword parameters workload ``name`` takes: its factory's own, then the
    request paths' (every workload's); ``None`` when its factory takes any (``**params``)."""
    factory = _factory(name)
    own: list[str] = []
    for param in inspect.signature(factory).parameters.values():
        if param.kind is param.VAR_KEYWORD:
            return None
        if param.kind in (param.KEYWORD_ONLY, param.POSITIONAL_OR_KEYWORD) and param.name != "seed":
            own.append(param.name)
    return (*own, *REQUEST_PATH_PARAMS)


def _factory(name: str) -> WorkloadFactory:
    try:
        return WORKLOADS[name]
    except KeyError:
        raise LlmPerfUsageError(
            f"unknown workload {name!r}; known workloads: {', '.join(workload_names())}"
        ) from None


def _check_params(name: str, given: Sequence[str], also_takes: Sequence[str]) -> None:
    """A usage error naming each parameter workload ``name`` does not take, the nearest
    one it does, and every one it takes (``also_takes``: the caller's own, listed last)."""
    takes = workload_params(name)
    if takes is None:
        return
    unknown = [k for k in given if k not in takes]
    if unknown:
        valid = [*takes, *also_takes]
        renamed = RENAMED_PARAMS.get(name, {})
        raise LlmPerfUsageError(
            f"workload {name!r}: does not take "
            + ", ".join(f"{k}={_nearest(k, valid, renamed)}" for k in unknown)
            + f"; it takes {', '.join(f'{k}=' for k in valid)}"
        )


def _nearest(word: str, valid: Sequence[str], renamed: Mapping[str, str]) -> str:
    """:func:`did_you_mean` over the names taken and the old ones, naming the new name for an
    old one (``sesions=`` -> "did you mean conversations?")."""
    hint = did_you_mean(word, [*valid, *renamed])
    for old, new in renamed.items():
        if hint == f" (did you mean {old}?)":
            return f" (did you mean {new}?)"
    return hint


def _renamed(name: str, params: dict[str, Any]) -> None:
    """Map the old spellings in ``params`` to the new ones in place (a DeprecationWarning
    each); both spellings of one parameter at once is a usage error."""
    for old, new in RENAMED_PARAMS.get(name, {}).items():
        if old not in params:
            continue
        if new in params:
            raise LlmPerfUsageError(
                f"workload {name!r}: {old}= is the old name of {new}=; give {new}= only"
            )
        warnings.warn(
            f"workload {name!r}: {old}= is now {new}= (the old name is kept until the next "
            "release; docs/conversations.md)",
            DeprecationWarning,
            stacklevel=3,  # the caller of build_workload
        )
        params[new] = params.pop(old)


def build_workload(
    name: str, *, seed: int = 0, also_takes: Sequence[str] = (), **params: Any
) -> Workload:
    """The workload ``name`` with ``params``; bad names or values are usage errors.

    A parameter the workload does not take is named with the nearest one it does and
    the whole list (``also_takes``: parameters the caller took itself before passing the
    rest here, such as ``llm_workload``'s ``requests=``, listed after the workload's own).

    ``structured=``, ``tools=``, ``tool_choice=``, ``adapters=`` and ``greedy=``
    are taken here, for every workload: checked before the workload is built
    (a bad schema fails fast, whatever the workload costs to build), then the
    built workload is wrapped so its samples carry them
    (:class:`~.request_paths.RequestPathsWorkload`). Without any of them the
    workload is returned as its factory built it.
    """
    factory = _factory(name)
    _renamed(name, params)
    _check_params(name, list(params), also_takes)
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
