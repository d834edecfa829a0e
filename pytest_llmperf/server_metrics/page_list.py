"""``--llm-server-metrics`` as a list of pages: ``ROLE[:NAME]=URL,...``, ``@FILE``, ``discover=``.

A deployment of several processes (a router, replicas, a disaggregated deployment's
prefill and decode pools) has one ``/metrics`` page per process. The option names
them as comma-separated items, each a page with its role (:class:`PageRole`) and
name, a bare ``SECONDS`` for the interval, or ``discover=URL`` (a router's base
URL, asked for its workers at preflight: :mod:`.discovery`)::

    router=http://r:9000/metrics,replica:w1=http://w1:8001/metrics,replica=http://w2:8001/metrics

``NAME`` defaults to the URL's ``host:port``: a replica page's name should be what the
replica's response header says (``x-replica-id``), so the client's per-replica view and
the page's server view join by name. ``discover`` alone (or ``discover=endpoint``) asks the
endpoint's own base URL (a ``sim:`` endpoint's URL is known only once it has started).
``@PATH`` reads the items from a file, one a line
(``#`` comments and blank lines skipped). Everything here is checked at configure time:
a bad item is a :class:`~pytest_llmperf.errors.LlmPerfUsageError` naming the option (and
the file and line) and the item.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.server_metrics.fleet import PageSpec
from pytest_llmperf.specs.fleet_names import PAGE_ROLES, PageRole

__all__ = ["DISCOVER", "ENDPOINT", "PageList", "is_page_list", "page_name", "parse_page_list"]

DISCOVER = "discover"  # discover=URL: a router's base URL, asked for its workers
ENDPOINT = "endpoint"  # discover (alone) or discover=endpoint: the endpoint's own base URL
_OPTION = "--llm-server-metrics"
_DEFAULT_INTERVAL_S = 1.0
_MAX_INTERVAL_S = 3600.0
_NAME_FORBIDDEN = frozenset(",=# \t")


@dataclass(frozen=True, slots=True)
class PageList:
    """The option's list: ``pages`` as given, ``discover`` (a router's base URL,
    ``"endpoint"``: the endpoint's own, None: none to ask), ``interval_s`` between
    samples, ``origin``: the file read (None: inline)."""

    pages: tuple[PageSpec, ...] = ()
    discover: str | None = None
    interval_s: float = _DEFAULT_INTERVAL_S
    origin: str | None = None


def is_page_list(text: str) -> bool:
    """Whether an option value is a list of pages (``@FILE`` or an item with ``=``), not one
    of today's ``auto|off|URL|SECONDS`` (a URL is never a list, whatever its query holds)."""
    text = text.strip()
    if text.lower().startswith(("http://", "https://")):
        return False
    items = [i.strip().lower() for i in text.split(",")]
    return text.startswith("@") or "=" in text or DISCOVER in items


def page_name(url: str) -> str:
    """A page's default name: its URL's ``host:port`` (``host`` when it names no port)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    return f"{host}:{port}" if port else host


def parse_page_list(value: str, *, where: str = _OPTION) -> PageList:
    """The list ``value`` names (module docstring), or a usage error naming ``where`` and the
    bad item."""
    text = value.strip()
    if text.startswith("@"):
        items = _file_items(text[1:].strip(), where)
        origin: str | None = text[1:].strip()
    else:
        items = [(where, item.strip()) for item in text.split(",") if item.strip()]
        origin = None
    pages: list[PageSpec] = []
    seen: dict[str, str] = {}
    discover: str | None = None
    interval: float | None = None
    for place, item in items:
        if item.lower() == DISCOVER:  # the endpoint's own base URL: a sim: URL is known late
            item = f"{DISCOVER}={ENDPOINT}"
        if "=" not in item:
            seconds = _seconds(item)
            if seconds is None:
                raise LlmPerfUsageError(
                    f"expected ROLE[:NAME]=URL (roles {', '.join(PAGE_ROLES)}), discover=URL or "
                    f"the seconds between samples, got {item!r}",
                    where=place,
                )
            if interval is not None:
                raise LlmPerfUsageError(f"the interval is given twice ({item!r})", where=place)
            interval = seconds
            continue
        key, _, url = (s.strip() for s in item.partition("="))
        if key.lower() == DISCOVER:
            if discover is not None:
                raise LlmPerfUsageError(f"discover= is given twice ({item!r})", where=place)
            discover = url if url.lower() == ENDPOINT else _url(url, item, place)
            continue
        role_text, _, name = (s.strip() for s in key.partition(":"))
        try:
            role = PageRole(role_text.lower())
        except ValueError:
            raise LlmPerfUsageError(
                f"unknown role {role_text!r} in {item!r} (roles: {', '.join(PAGE_ROLES)})",
                where=place,
            ) from None
        url = _url(url, item, place)
        if ":" in key and not name:
            raise LlmPerfUsageError(f"an empty page name in {item!r}", where=place)
        name = name or page_name(url)
        if _NAME_FORBIDDEN & set(name):
            raise LlmPerfUsageError(
                f"a page name with a space, ',', '=' or '#': {item!r}", where=place
            )
        if name in seen:
            raise LlmPerfUsageError(
                f"two pages named {name!r} ({seen[name]!r} and {item!r}): give each its own "
                "NAME (ROLE:NAME=URL)",
                where=place,
            )
        seen[name] = item
        pages.append(PageSpec(role, name, url))
    if not pages and discover is None:
        raise LlmPerfUsageError(
            f"a list of pages names no page and no discover=URL: {value!r}", where=where
        )
    return PageList(tuple(pages), discover, interval or _DEFAULT_INTERVAL_S, origin)


def _file_items(path: str, where: str) -> list[tuple[str, str]]:
    """``(where, item)`` for each line of the file at ``path`` (``where`` names its line)."""
    if not path:
        raise LlmPerfUsageError("@ needs a file name (@pages.txt)", where=where)
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise LlmPerfUsageError(f"no such file of pages: {path!r}", where=where) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LlmPerfUsageError(
            f"cannot read the file of pages {path!r}: {exc}", where=where
        ) from None
    items: list[tuple[str, str]] = []
    for number, line in enumerate(lines, 1):
        item = line.split("#", 1)[0].strip()
        if item.startswith("@"):
            raise LlmPerfUsageError(
                f"a file of pages cannot name another file: {item!r}", where=where
            )
        if item:
            items.append((f"{where} ({path}, line {number})", item))
    return items


def _url(url: str, item: str, where: str) -> str:
    if not url:
        raise LlmPerfUsageError(f"no URL in {item!r}", where=where)
    if not url.lower().startswith(("http://", "https://")) or not urlsplit(url).hostname:
        raise LlmPerfUsageError(
            f"expected an http(s):// URL with a host in {item!r}, got {url!r}", where=where
        )
    return url


def _seconds(text: str) -> float | None:
    try:
        seconds = float(text.lower().removesuffix("s"))
    except ValueError:
        return None
    return seconds if 0 < seconds < _MAX_INTERVAL_S else None
