from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # mlflow_server, otlp_receiver

from mlflow_server import MlflowServer, start_mlflow_server


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    """One real MLflow tracking server per test process (SQLite store, local artefacts)."""
    yield from start_mlflow_server(tmp_path_factory.mktemp("mlflow"))
