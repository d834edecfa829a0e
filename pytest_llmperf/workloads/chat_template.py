"""Rendering a model's chat template as its server does, to count the tokens it adds.

Hugging Face chat templates are Jinja templates stored with the tokenizer
(``tokenizer_config.json``'s ``chat_template``, or ``chat_template.jinja``).
Servers built on ``transformers`` (vLLM, SGLang, TGI, ``transformers serve``)
render them in a sandboxed Jinja environment with ``trim_blocks`` and
``lstrip_blocks``, the loop-control extension, a ``tojson`` filter and the
``raise_exception``/``strftime_now`` helpers, with the special tokens
(``bos_token``, ``eos_token``, ...) as variables; this module does the same,
with jinja2 (a core dependency), so the rendered text tokenizes as the
server's does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jinja2 import Template

__all__ = ["TemplateError", "find_chat_template", "render_chat", "special_tokens"]

_SPECIAL_KEYS = (
    "bos_token",
    "eos_token",
    "unk_token",
    "pad_token",
    "sep_token",
    "cls_token",
    "mask_token",
)


class TemplateError(ValueError):
    """The template cannot be rendered for these messages (it raised, or is not Jinja)."""


def find_chat_template(folder: Path | None, config: Mapping[str, Any]) -> str | None:
    """The default chat template of a tokenizer folder, wherever this model keeps it."""
    template = config.get("chat_template")
    if isinstance(template, list):  # [{"name": "default", "template": ...}, {"name": ...}, ...]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default") or next(iter(named.values()), None)
    if isinstance(template, str) and template:
        return template
    if folder is None:
        return None
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text("utf-8")
    stored = folder / "chat_template.json"
    if stored.is_file():
        try:
            value = json.loads(stored.read_text("utf-8")).get("chat_template")
        except (ValueError, AttributeError):
            return None
        return value if isinstance(value, str) and value else None
    return None


def special_tokens(config: Mapping[str, Any]) -> dict[str, str]:
    """``bos_token`` etc. as strings (configs store some as ``{"content": ...}`` objects)."""
    out: dict[str, str] = {}
    for key in _SPECIAL_KEYS:
        value = config.get(key)
        if isinstance(value, Mapping):
            value = value.get("content")
        if isinstance(value, str):
            out[key] = value
    return out


def render_chat(
    template: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = True,
    tokens: Mapping[str, str] | None = None,
) -> str:
    """``messages`` rendered by ``template`` (raises :class:`TemplateError`)."""
    import jinja2

    try:
        compiled = _compile(template)
        return compiled.render(
            messages=[dict(m) for m in messages],
            add_generation_prompt=add_generation_prompt,
            tools=None,
            documents=None,
            **dict(tokens or {}),
        )
    except (jinja2.TemplateError, TypeError, ValueError, KeyError, AttributeError) as exc:
        raise TemplateError(f"{type(exc).__name__}: {exc}") from None


@lru_cache(maxsize=8)
def _compile(template: str) -> Template:
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    def tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, **kw: Any) -> str:
        separators = kw.get("separators")
        sort_keys = bool(kw.get("sort_keys", False))
        return json.dumps(
            value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
            sort_keys=sort_keys,
        )  # fmt: skip

    def strftime_now(fmt: str) -> str:
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(template)
