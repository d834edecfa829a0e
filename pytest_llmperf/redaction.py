"""Scrubbing secrets out of text before it can reach any output.

The API key is only ever meant to travel in the ``Authorization`` header, but
text from elsewhere can carry it back: a server that echoes the key in a 401
body ("Incorrect API key provided: sk-..."), an exception message that quotes a
URL with ``user:password@`` in it, a header dump. Every message that leaves
the client's failure path or the plugin's error path goes through
:func:`scrub` first, so reports, logs and event files cannot leak what the
process was given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote

__all__ = ["MASK", "scrub", "scrub_all"]

MASK = "***"
_MIN_SECRET = 4  # shorter "secrets" would mask ordinary words and numbers

# scheme://user:password@host  ->  scheme://***@host
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s'\"<>]+@")
# "Authorization: Bearer abc", "Bearer abc", "Basic abc=="
_AUTH_VALUE = re.compile(r"(?i)\b(?P<how>bearer|basic)(?P<sep>\s+)[A-Za-z0-9._~+/=-]{4,}")


def scrub(text: str, *secrets: str | None) -> str:
    """``text`` with every given secret (also URL-encoded), URL credentials and
    ``Bearer``/``Basic`` values replaced by ``***``."""
    if not text:
        return text
    for secret in secrets:
        if not secret or len(secret) < _MIN_SECRET:
            continue
        text = text.replace(secret, MASK)
        encoded = quote(secret, safe="")
        if encoded != secret:
            text = text.replace(encoded, MASK)
    text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    return _AUTH_VALUE.sub(lambda m: f"{m['how']}{m['sep']}{MASK}", text)


def scrub_all(texts: Iterable[str], *secrets: str | None) -> list[str]:
    """:func:`scrub` applied to each text."""
    return [scrub(t, *secrets) for t in texts]
