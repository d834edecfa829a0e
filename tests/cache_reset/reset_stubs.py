"""Stub HTTP servers (aiohttp, on 127.0.0.1, in a thread of the test process) shaped like
the servers whose cache resets are probed: real sockets, real status codes.

A plain module (not conftest) so test modules can import its helpers by a unique name."""

from __future__ import annotations

from loopback import ServeApp

Serve = ServeApp
