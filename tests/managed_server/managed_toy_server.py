"""A tiny server for tests/managed_server: ``python managed_toy_server.py --port P [...]``.

It answers every GET with ``{"data": [{"id": MODEL}]}`` once it listens. Options make
it misbehave the ways a real server does: exit early, ignore SIGTERM, write a lot,
fork children (one of them in a new session), print secrets it was given.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--model", default="toy")
    parser.add_argument("--exit-code", type=int, default=None, help="exit at once with it")
    parser.add_argument("--kill-self", type=int, default=None, help="die of this signal")
    parser.add_argument("--never-listen", action="store_true")
    parser.add_argument("--listen-after", type=float, default=0.0)
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--chatty-mb", type=float, default=0.0, help="write this much first")
    parser.add_argument("--keep-chatting", action="store_true")
    parser.add_argument("--children", default="", help="pid file: fork a child and a setsid one")
    parser.add_argument("--say", default="", help="print this line (a secret, say)")
    parser.add_argument("--api-key", default="")
    args = parser.parse_args()

    print(f"toy server starting on port {args.port}", flush=True)
    if args.say:
        print(args.say, flush=True)
    if args.api_key:
        print(f"api_key={args.api_key}", flush=True)
    for name, value in sorted(os.environ.items()):
        if name.startswith("TOY_"):
            print(f"{name}={value}", flush=True)
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.exit_code is not None:
        print("toy server: giving up", flush=True)
        sys.exit(args.exit_code)
    if args.kill_self is not None:
        os.kill(os.getpid(), args.kill_self)
    line = b"x" * 1023 + b"\n"
    for _ in range(int(args.chatty_mb * 1024)):
        sys.stdout.buffer.write(line)
    sys.stdout.flush()
    if args.children:
        sleeper = [sys.executable, "-c", "import time\nwhile True: time.sleep(1)"]
        child = subprocess.Popen(sleeper)
        loner = subprocess.Popen(sleeper, start_new_session=True)
        with open(args.children, "w") as f:
            f.write(f"{child.pid} {loner.pid}\n")
    if args.never_listen:
        while True:
            time.sleep(1)
    time.sleep(args.listen_after)
    model = args.model

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"object": "list", "data": [{"id": model}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *a: object) -> None:
            pass

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print("toy server listening", flush=True)
    if args.keep_chatting:
        import threading

        def chat() -> None:
            while True:
                sys.stdout.buffer.write(line * 64)
                sys.stdout.flush()

        threading.Thread(target=chat, daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
