"""Modules loaded once for the whole test session, before any in-process pytester run.

pytester's ``runpytest`` (in-process) removes from ``sys.modules`` every module
first imported during the inner session. When that is part of httpx's stack
(httpcore's anyio backend, anyio's asyncio backend), the next import makes new
exception classes that httpx's own mapping does not know, and a plain
``ConnectError`` escapes unclassified: a test order artefact, not a bug of
the client. Importing them here keeps one copy for the session.
"""

import anyio._backends._asyncio  # noqa: F401
import httpcore._backends.anyio  # noqa: F401
import httpx  # noqa: F401
