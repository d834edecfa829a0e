"""How long, and for how many requests, a pooled connection may be reused.

Why this is a rule of its own: a request written into a connection the server
is closing fails for a reason that is not the server's (docs/measurement.md,
"Connections"). The client cannot see the close coming, but the server often
says when it will: ``Keep-Alive: timeout=5, max=100`` (llama.cpp's server,
Apache, cpp-httplib) means "I drop a connection idle for 5 s, and close one
after 100 requests". A connection is retired *before* either, by a margin,
rather than discovered closed by the next request.

- ``timeout=N``: the connection may sit idle for at most
  :func:`idle_limit` ``(N)`` seconds, N minus a margin of one second (half of N
  below two seconds): the server starts its clock when it has written the
  response, the client when it has read it, a little later.
- ``max=N``: at most N requests are written on the connection. Apache sends
  the requests *left* (a falling count), cpp-httplib and MDN mean the total;
  reading it as the total is right for the second and only conservative for
  the first (a new connection a little early).
- Nothing said: :data:`KEEPALIVE_S`, under the 5 s idle timeout of uvicorn
  (vLLM, SGLang, transformers serve), which does not announce it.

Header values are parsed leniently, as urllib3 and browsers do: parameters in
any order and case, separated by commas or semicolons, values optionally
quoted; an unreadable, negative or non-finite value is ignored (as if not
sent), and of two values for one parameter (a repeated header) the smaller
one holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["KEEPALIVE_S", "KeepAlive", "idle_limit", "parse_keep_alive"]

KEEPALIVE_S = 4.0  # the idle limit when the server announces none
_MARGIN_S = 1.0  # taken off an announced timeout (half of it below 2 s)
_PARAM = re.compile(r"\s*([A-Za-z]+)\s*=\s*\"?\s*([0-9]+(?:\.[0-9]+)?)\s*\"?\s*$")


@dataclass(frozen=True, slots=True)
class KeepAlive:
    """What one ``Keep-Alive`` header announced; None where it said nothing usable."""

    timeout_s: float | None = None
    max_requests: int | None = None


def parse_keep_alive(value: str) -> KeepAlive:
    """The ``timeout=`` and ``max=`` of a ``Keep-Alive`` header value (others ignored)."""
    timeout: float | None = None
    most: int | None = None
    for part in value.replace(";", ",").split(","):
        match = _PARAM.match(part)
        if match is None:
            continue
        name, number = match.group(1).lower(), match.group(2)
        if name == "timeout":
            seconds = float(number)
            timeout = seconds if timeout is None else min(timeout, seconds)
        elif name == "max" and "." not in number:
            count = int(number)
            most = count if most is None else min(most, count)
    return KeepAlive(timeout, most)


def idle_limit(timeout_s: float) -> float:
    """How long a connection whose server announced ``timeout=timeout_s`` may stay idle."""
    return max(0.0, timeout_s - min(_MARGIN_S, timeout_s / 2))
