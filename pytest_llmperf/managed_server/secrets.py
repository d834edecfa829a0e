"""Which values of a server's command line and environment are secrets.

A secret is the value of an option or variable whose name says so: a name part
(split at ``-``, ``_`` and ``.``) that is or ends in KEY, TOKEN, SECRET or PASSWORD
(``--api-key X``, ``--api-key=X``, ``--hf-token X``, ``token=X`` in a URL's query,
``-e HF_TOKEN=X``, ``OPENAI_API_KEY``, ``PGPASSWORD``; not ``--max-num-batched-tokens``
nor ``TOKENIZERS_PARALLELISM``), and the value of the endpoint's key variable. Every
shown form (the command in the reports, the log's first line, the log tail) passes
through :func:`pytest_llmperf.redaction.scrub` with these values.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence

from pytest_llmperf.redaction import scrub

__all__ = [
    "command_secrets",
    "is_secret_name",
    "join_argv",
    "scrub_command_text",
    "shown_command",
]

_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD")
_PARTS = re.compile(r"[-_.]+")
_PAIR = re.compile(r"([A-Za-z0-9_.-]+)=([^\s&;,'\"]+)")
# plain settings that happen to sit under a secret-looking name (HF_HUB_DISABLE_TOKEN=1)
_NOT_SECRET = re.compile(r"(?i)^(true|false|yes|no|on|off|none|null|[0-9.]+)$")
_RAW_OPTION = re.compile(
    r"(?i)(?P<name>-{0,2}[A-Za-z0-9_.-]*(?:key|token|secret|passw(?:or)?d)[A-Za-z0-9_.-]*)"
    r"(?P<sep>=|\s+)(?P<value>[^\s&;,'\"]+)"
)


def is_secret_name(name: str) -> bool:
    """Whether an option or variable called ``name`` holds a secret."""
    return any(
        part.endswith(word) for part in _PARTS.split(name.strip("-").upper()) for word in _WORDS
    )


def _keep(value: str, found: list[str]) -> None:
    if value and not _NOT_SECRET.match(value) and value not in found:
        found.append(value)


def command_secrets(
    argv: Sequence[str], env: Mapping[str, str], api_key_env: str | None = None
) -> list[str]:
    """The secret values in ``argv``, in ``env`` (the variables added for the server) and
    in this process's environment (which the server inherits), with ``api_key_env``'s."""
    found: list[str] = []
    for i, arg in enumerate(argv):
        if arg.startswith("-") and "=" not in arg and is_secret_name(arg):
            if i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                _keep(argv[i + 1], found)
            continue
        for name, value in _PAIR.findall(arg):
            if is_secret_name(name):
                _keep(value, found)
    for source in (env, os.environ):
        for name, value in source.items():
            if is_secret_name(name):
                _keep(value, found)
    if api_key_env:
        for source in (env, os.environ):
            if source.get(api_key_env):
                _keep(source[api_key_env], found)
    return found


def shown_command(
    argv: Sequence[str], env: Mapping[str, str], api_key_env: str | None = None
) -> str:
    """``argv`` as one shell-quoted string, every secret replaced by ``***``."""
    return scrub(join_argv(argv), *command_secrets(argv, env, api_key_env))


def join_argv(argv: Sequence[str]) -> str:
    """``argv`` shell-quoted as one string, ``{port}`` and ``{host}`` left as they read."""
    marks = {"{port}": "LLMPERFPORTMARK", "{host}": "LLMPERFHOSTMARK"}
    quoted = []
    for arg in argv:
        for placeholder, mark in marks.items():
            arg = arg.replace(placeholder, mark)
        text = shlex.quote(arg)
        for placeholder, mark in marks.items():
            text = text.replace(mark, placeholder)
        quoted.append(text)
    return " ".join(quoted)


def scrub_command_text(text: str) -> str:
    """A raw command string (one that could not be split) with the values of
    secret-named options masked."""
    return _RAW_OPTION.sub(
        lambda m: m[0] if not is_secret_name(m["name"]) else f"{m['name']}{m['sep']}***", text
    )
