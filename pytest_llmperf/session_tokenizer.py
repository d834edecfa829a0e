"""``--llm-tokenizer``: which tokenizer sizes a session's prompts, chosen once per session.

A requested input length is only meaningful in the model's own tokens, and
only if it includes what the server adds (chat template, BOS). The option
names the tokenizer; unset, the model's own is used when it can be had
without a download, in this order:

1. the ``root`` that ``GET /v1/models`` reports for the model, when it is a
   local folder holding ``tokenizer.json`` (vLLM reports the path it loaded);
2. the local Hugging Face cache, offline (``models--ORG--NAME/snapshots/*/``);
3. the server's own ``POST /tokenize`` (vLLM's and SGLang's shape, or
   llama.cpp's ``llama-server``), calibrated once here;
4. else the approximation, with a :class:`TokenizerFallbackWarning` naming why
   each of the above was not available.

Against the embedded simulator the approximation *is* the server's
tokenizer, so it is used without a warning. Library use needs no pytest:
:func:`choose_tokenizer` takes an endpoint and returns the choice.

Every call to the server here (``GET /v1/models``, unless the preflight's
answer is handed in, and ``/tokenize``) is one of the metadata client's
(:mod:`~pytest_llmperf.client.metadata`): bounded by ``--llm-timeout``,
transient answers retried. In the default order a call that
fails is one more reason in the fallback warning; with ``server`` asked for,
it is the metadata client's usage error.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmperf.client.blocking_metadata import BlockingMetadataClient
from pytest_llmperf.client.endpoint import Endpoint, redact_url
from pytest_llmperf.client.metadata import Answer, server_root
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.hf_cache import cached_tokenizer_file, hub_cache_dir
from pytest_llmperf.workloads.hf_tokenizer import (
    TOKENIZERS_MISSING,
    load_hf_tokenizer,
    looks_like_path,
    tokenizer_file,
)
from pytest_llmperf.workloads.server_tokenizer import (
    RouteAnswer,
    ServerTokenizer,
    TokenizeRouteError,
    probe_tokenize,
    require_tokenize,
)
from pytest_llmperf.workloads.tiktoken_tokenizer import (
    TiktokenTokenizer,
    TiktokenUnavailable,
    load_offline,
    tiktoken_names,
)
from pytest_llmperf.workloads.tokenizer import (
    APPROXIMATE,
    SERVER,
    ApproximateTokenizer,
    Tokenizer,
    bind_api,
)

__all__ = [
    "OPTION",
    "TokenizerChoice",
    "TokenizerFallbackWarning",
    "check_tokenizer_option",
    "choose_tokenizer",
    "session_tokenizer",
]

OPTION = "--llm-tokenizer"
_APPROX = "approximate (words and punctuation)"
_SIM_LABEL = f"{_APPROX}: the embedded simulator's own tokenizer"


class TokenizerFallbackWarning(UserWarning):
    """Prompts are sized with the approximation against a real server: lengths will differ."""


@dataclass(frozen=True)
class TokenizerChoice:
    """The session's tokenizer, where it came from, and why better sources were passed over."""

    tokenizer: Tokenizer
    source: str  # option | model-root | hf-cache | server | simulator | approximation
    passed_over: tuple[str, ...] = ()
    model: str | None = None

    @property
    def warning(self) -> str | None:
        """The fallback warning's text (None unless the approximation stands in for a model)."""
        if self.source != "approximation":
            return None
        why = "; ".join(self.passed_over) or "no tokenizer source was available"
        return (
            f"prompts are sized with the approximate tokenizer (words and punctuation), not "
            f"{self.model or 'the model'}'s own: {why}. Input lengths will differ from what the "
            f"server counts; pass {OPTION}=PATH|NAME|server"
        )


def check_tokenizer_option(value: Any) -> str | None:
    """``--llm-tokenizer``'s value, checked without loading anything (usage errors say why)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    text = str(value).strip()
    if text in (SERVER, APPROXIMATE):
        return text
    if looks_like_path(text):
        if tokenizer_file(text) is None and cached_tokenizer_file(text) is None:
            raise LlmPerfUsageError(
                f"{text!r} is neither a tokenizer.json file, a folder holding one, nor a "
                f"model in the Hugging Face cache {hub_cache_dir()}",
                where=OPTION,
            )
        if not _have_tokenizers():
            raise LlmPerfUsageError(f"{text!r} {TOKENIZERS_MISSING}", where=OPTION)
        return text
    names = tiktoken_names()
    if names is not None and text in names:
        return text
    known = "tiktoken is not installed" if names is None else "tiktoken: " + ", ".join(names)
    raise LlmPerfUsageError(
        f"{text!r} is not a tokenizer folder or tokenizer.json path, 'server', 'approximate' "
        f"or a tiktoken encoding name ({known})",
        where=OPTION,
    )


def session_tokenizer(
    option: str | None, endpoint: Endpoint, *, listing: Answer | None = None
) -> Tokenizer:
    """:func:`choose_tokenizer`'s tokenizer; a fallback is announced as a warning."""
    choice = choose_tokenizer(option, endpoint, listing=listing)
    if choice.warning:
        warnings.warn(TokenizerFallbackWarning(choice.warning), stacklevel=2)
    return choice.tokenizer


def choose_tokenizer(
    option: str | None, endpoint: Endpoint, *, listing: Answer | None = None
) -> TokenizerChoice:
    """The tokenizer for ``endpoint`` (its model resolved): ``option``'s, or the default order.

    An explicit ``option`` that cannot be honoured is a usage error naming
    the option (``server`` with a call out of time or retries: the metadata
    client's, naming the call); the default order never fails, it falls back.
    ``listing``: the server's ``GET /v1/models`` as the preflight read it (its
    :class:`~pytest_llmperf.client.preflight_result.PreflightResult`), not asked again.
    """
    option = check_tokenizer_option(option)
    api = endpoint.api
    if option == APPROXIMATE:
        return TokenizerChoice(ApproximateTokenizer(), "option")
    if endpoint.sim_profile and option is None:
        return TokenizerChoice(ApproximateTokenizer(_SIM_LABEL), "simulator")
    if option == SERVER:
        tok = ServerTokenizer(MetadataRoutes(endpoint), endpoint.model)
        try:
            return _server_choice(tok, endpoint)
        except BaseException:
            tok.close()
            raise
    if option is not None:
        return TokenizerChoice(bind_api(_explicit(option), api), "option")
    return _default(endpoint, listing)


def _server_choice(tok: ServerTokenizer, endpoint: Endpoint) -> TokenizerChoice:
    """``server`` asked for: the server's ``/tokenize`` calibrated, or a usage error."""
    if endpoint.sim_profile:  # its /tokenize, if it has one, counts as the approximation
        try:
            probe_tokenize(tok)
        except TokenizeRouteError:
            tok.close()
            return TokenizerChoice(ApproximateTokenizer(_SIM_LABEL), "simulator")
    require_tokenize(tok, OPTION)  # a call out of time or retries: the metadata client's error
    try:
        return TokenizerChoice(bind_api(tok.calibrate(), endpoint.api), "option")
    except TokenizeRouteError as exc:
        message = f"calibrating with the server failed: {exc}"
        raise LlmPerfUsageError(message, where=OPTION) from None


def _explicit(option: str) -> Tokenizer:
    try:
        if looks_like_path(option):
            cached = None if tokenizer_file(option) else cached_tokenizer_file(option)
            return load_hf_tokenizer(cached or option)
        return TiktokenTokenizer(load_offline(option), option)
    except TiktokenUnavailable as exc:
        raise LlmPerfUsageError(
            f"{option!r} is not available offline ({exc})", where=OPTION
        ) from None
    except LlmPerfUsageError as exc:
        raise exc.located(OPTION) from None


def _default(endpoint: Endpoint, listing: Answer | None) -> TokenizerChoice:
    routes = MetadataRoutes(endpoint)  # one connection for the listing and /tokenize
    try:
        choice = _default_order(endpoint, routes, listing)
    except BaseException:
        routes.close()
        raise
    if choice.source != "server":  # only the server tokenizer keeps calling
        routes.close()
    return choice


def _default_order(
    endpoint: Endpoint, routes: MetadataRoutes, listing: Answer | None
) -> TokenizerChoice:
    api, model = endpoint.api, endpoint.model
    passed: list[str] = []
    root, why = _model_root(routes.meta, listing)
    if why:
        passed.append(why)
    if _have_tokenizers():
        local = [p for p in (root, model) if p and Path(p).expanduser().is_dir()]
        before = len(passed)
        for path in local:
            if tokenizer_file(path) is not None:
                found = _try_load(path, passed)
                if found is not None:
                    return TokenizerChoice(bind_api(found, api), "model-root")
        if local and len(passed) == before:
            passed.append(f"the model folder {local[0]} has no tokenizer.json")
        elif root and not local:
            passed.append(f"GET /v1/models gives root {root!r}, not a folder on this machine")
        repos = list(dict.fromkeys(r for r in (root, model) if r and r not in local))
        for repo in repos:
            file = cached_tokenizer_file(repo)
            found = _try_load(file, passed) if file is not None else None
            if found is not None:
                return TokenizerChoice(bind_api(found, api), "hf-cache")
        if repos:
            passed.append(f"{' / '.join(repos)} is not in the Hugging Face cache {hub_cache_dir()}")
    else:
        passed.append(f"a local model tokenizer {TOKENIZERS_MISSING}")
    tok = ServerTokenizer(routes, model)
    try:
        probe_tokenize(tok)
        return TokenizerChoice(bind_api(tok.calibrate(), api), "server")
    except TokenizeRouteError as exc:
        passed.append(f"the server's {exc}")
    except LlmPerfUsageError as exc:  # a call out of time or retries: one more reason
        passed.append(f"the server's {exc.message}")
    label = f"{_APPROX}; the model's tokenizer is not available offline"
    return TokenizerChoice(ApproximateTokenizer(label), "approximation", tuple(passed), model)


def _try_load(path: str | Path, passed: list[str]) -> Tokenizer | None:
    """The tokenizer at ``path``, or None with the reason noted (the default never fails)."""
    try:
        return load_hf_tokenizer(path)
    except LlmPerfUsageError as exc:
        passed.append(str(exc))
        return None


class MetadataRoutes:
    """The server tokenizer's routes (:class:`~.workloads.server_tokenizer.TokenizeRoutes`),
    called through the metadata client; pickles as the endpoint (worker processes)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.meta = BlockingMetadataClient(endpoint)
        self.where = server_root(redact_url(endpoint.base_url))

    def post(self, route: str, body: Mapping[str, Any]) -> RouteAnswer:
        answer = self.meta.call("POST", self.meta.root_url(route), json=dict(body))
        try:
            data = answer.json()
        except ValueError:
            data = None
        return RouteAnswer(answer.status, data, answer.message)

    def close(self) -> None:
        self.meta.close()


def _model_root(
    meta: BlockingMetadataClient, listing: Answer | None
) -> tuple[str | None, str | None]:
    """The ``root`` of the served model in ``GET /v1/models`` (and why there is none):
    ``listing``, the preflight's answer, else asked here."""
    try:
        answer = listing if listing is not None else meta.call("GET", meta.url("/models"))
    except LlmPerfUsageError as exc:
        return None, f"GET /v1/models failed ({exc.message})"
    if answer.status != 200:
        return None, f"GET /v1/models answered HTTP {answer.status}"
    try:
        data = answer.json()["data"]
        entries = [e for e in data if isinstance(e, dict)]
    except (ValueError, KeyError, TypeError):
        return None, "GET /v1/models answered no model list"
    entry = next((e for e in entries if e.get("id") == meta.endpoint.model), None)
    root = (entry or {}).get("root")
    if isinstance(root, str) and root:
        return root, None
    return None, None  # no root: the model id itself is tried next


def _have_tokenizers() -> bool:
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        return False
    return True
