from __future__ import annotations

import json
import urllib.request

from mlflow_server import MlflowServer


def test_the_tracking_server_answers_its_rest_api(mlflow_server: MlflowServer) -> None:
    request = urllib.request.Request(
        f"{mlflow_server.url}/api/2.0/mlflow/experiments/search",
        data=json.dumps({"max_results": 10}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        body = json.load(answer)
    # shared by the process's tests: others may have made experiments of their own
    assert "Default" in [e["name"] for e in body["experiments"]]
