from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.export.mlflow_server import MlflowServer, start_mlflow_server


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    """One real MLflow tracking server per test process (SQLite store, local artefacts)."""
    yield from start_mlflow_server(tmp_path_factory.mktemp("mlflow"))
