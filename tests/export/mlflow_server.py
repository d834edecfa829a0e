"""A real MLflow tracking server for the export tests: ``mlflow server`` with a SQLite
store and a local artefact folder, on a free loopback port, started once per test
process and stopped at its end.

Both exports are tested against it: ``--llm-mlflow`` logs runs through its REST API, and
``--llm-otel``'s spans reach its OTLP trace ingestion (``POST /v1/traces``). It takes some
7 s to start on a 2-core machine.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MlflowServer", "start_mlflow_server"]

READY_TIMEOUT_S = 90.0


@dataclass(frozen=True)
class MlflowServer:
    url: str  # http://127.0.0.1:PORT
    store: Path  # the SQLite file
    artifacts: Path
    log: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _mlflow_command() -> list[str]:
    """The ``mlflow`` beside this interpreter (the test extra installs it), else on PATH."""
    beside = Path(sys.executable).with_name("mlflow")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("mlflow")
    if found is None:
        raise RuntimeError("the mlflow command is not installed (pip install -e '.[test]')")
    return [found]


def start_mlflow_server(folder: Path) -> Iterator[MlflowServer]:
    """Start the server in ``folder``; yield it once it answers ``/health``; stop it."""
    folder.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    store, artifacts, log = folder / "mlflow.db", folder / "artifacts", folder / "server.log"
    command = [
        *_mlflow_command(),
        "server",
        "--backend-store-uri",
        f"sqlite:///{store}",
        "--default-artifact-root",
        str(artifacts),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    env = {
        **os.environ,
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "DO_NOT_TRACK": "true",
        # spans that name a GenAI provider (gen_ai.provider.name) make the server price
        # their tokens from a model catalog it fetches over the network by default
        # (seconds of retries here, and no network beyond loopback): the bundled one only
        "MLFLOW_MODEL_CATALOG_URI": "",
    }
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited {proc.returncode}: {log.read_text()}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"mlflow server not ready in {READY_TIMEOUT_S}s: {log}")
            time.sleep(0.2)
        yield MlflowServer(url, store, artifacts, log)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
