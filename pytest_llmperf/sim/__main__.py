"""Command line: ``python -m pytest_llmperf.sim`` (real-time server or --virtual run).

Server mode prints exactly one line, ``LISTENING http://HOST:PORT``, once it
accepts connections, then serves until SIGTERM/SIGINT (or stdin EOF with
``--exit-on-stdin-eof``). Virtual mode runs a load pattern against the engine
without sleeping and prints the run's metrics.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading

from .profiles import Profile, ProfileError, load_profile, profile_names

__all__ = ["main"]


def _parse_set(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ProfileError(f"--set expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _tokens_arg(text: str) -> tuple[int, int]:
    """``N`` or ``MIN:MAX`` (uniform, inclusive)."""
    lo, sep, hi = text.partition(":")
    try:
        a = int(lo)
        b = int(hi) if sep else a
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or MIN:MAX, got {text!r}") from None
    if a < 1 or b < a:
        raise argparse.ArgumentTypeError(f"expected 1 <= MIN <= MAX, got {text!r}")
    return a, b


def _adapters_arg(text: str) -> dict[str, float]:
    """``sim-lora-1=0.4,sim-lora-2=0.4``."""
    out: dict[str, float] = {}
    for item in text.split(","):
        name, sep, weight = item.partition("=")
        try:
            out[name.strip()] = float(weight)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise argparse.ArgumentTypeError(f"expected NAME=WEIGHT,..., got {text!r}")
    return out


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m pytest_llmperf.sim",
        description="Simulated OpenAI-compatible LLM server (pytest-llmperf).",
    )
    ap.add_argument(
        "--profile", default="fixed", help=f"profile name ({', '.join(profile_names())})"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a profile parameter (repeatable)",
    )
    srv = ap.add_argument_group("server mode")
    srv.add_argument("--host", default="127.0.0.1")
    srv.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    srv.add_argument(
        "--speedup", type=float, default=1.0, help="simulated seconds per wall-clock second"
    )
    srv.add_argument("--exit-on-stdin-eof", action="store_true", help="exit when stdin reaches EOF")
    vt = ap.add_argument_group("virtual-time mode")
    vt.add_argument(
        "--virtual",
        action="store_true",
        help="run a load pattern in virtual time and print metrics",
    )
    vt.add_argument("--load", choices=("poisson", "constant", "concurrency"), default="poisson")
    vt.add_argument(
        "--rate", type=float, default=None, help="requests per second (poisson, constant)"
    )
    vt.add_argument(
        "--concurrency", type=int, default=None, help="requests in flight (concurrency)"
    )
    vt.add_argument("--duration", type=float, default=60.0, help="seconds of arrivals (simulated)")
    vt.add_argument("--input-tokens", type=_tokens_arg, default=(1000, 1000), metavar="N|MIN:MAX")
    vt.add_argument("--output-tokens", type=_tokens_arg, default=(128, 128), metavar="N|MIN:MAX")
    vt.add_argument(
        "--shared-prefix",
        type=int,
        default=0,
        metavar="TOKENS",
        help="tokens of prompt prefix shared by every request (prefix caching)",
    )
    vt.add_argument(
        "--adapters",
        type=_adapters_arg,
        default=None,
        metavar="NAME=W,...",
        help="LoRA adapters drawn per request by weight (the rest: the base model)",
    )
    vt.add_argument("--json", default=None, metavar="PATH", help="also write the metrics as JSON")
    return ap


async def _serve(args: argparse.Namespace, profile: Profile) -> None:
    from .serving import SimServer

    server = SimServer(
        profile,
        host=args.host,
        port=args.port,
        seed=args.seed,
        speedup=args.speedup,
        timing="block",  # the loop serves nobody else in this process
        quiet_gc=True,  # nor does anything else need the garbage collector's timing
    )
    try:
        await server.start()
    except OSError as exc:
        raise SystemExit(f"error: cannot listen on {args.host}:{args.port}: {exc}") from None
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if args.exit_on_stdin_eof:
        # A thread, not loop.add_reader: stdin may be a regular file or /dev/null,
        # which epoll refuses.
        def wait_eof() -> None:
            fd = sys.stdin.fileno()
            try:
                while os.read(fd, 65536):
                    pass
            except OSError:
                pass
            loop.call_soon_threadsafe(stop.set)

        threading.Thread(target=wait_eof, name="stdin-eof", daemon=True).start()
    sys.stdout.write(f"LISTENING {server.url}\n")
    sys.stdout.flush()
    try:
        await stop.wait()
    finally:
        await server.stop()


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        # the profile with its --set overrides, validated before doing anything else
        profile = load_profile(args.profile, **_parse_set(args.overrides))
    except ProfileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.virtual:
        from .virtual_cli import run_cli

        return run_cli(args, profile)
    if args.speedup <= 0:
        print("error: --speedup must be positive", file=sys.stderr)
        return 2
    asyncio.run(_serve(args, profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
