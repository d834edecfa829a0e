"""A loopback OTLP/HTTP metrics receiver for the ``--llm-otel`` tests.

No OTLP *metrics* receiver installs here without a download at run time (MLflow ingests
OTLP traces only; Debian's Prometheus, 2.42, predates its OTLP receiver; no Collector
build ships on PyPI), so the metrics are checked by decoding what the exporter posts with
the OpenTelemetry project's own protobuf definitions (``opentelemetry-proto``'s
``ExportMetricsServiceRequest``), answering as the OTLP/HTTP spec says (200 with an
``ExportMetricsServiceResponse``; a body that does not decode is a 400). Every request's
headers and raw body are kept, so a test can also say what was *not* sent.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)

__all__ = ["OtlpMetricsReceiver", "otlp_metrics_receiver"]


@dataclass
class OtlpMetricsReceiver:
    url: str  # http://127.0.0.1:PORT (the base: the exporter posts to /v1/metrics)
    requests: list[ExportMetricsServiceRequest] = field(default_factory=list)
    raw: list[tuple[str, dict[str, str], bytes]] = field(
        default_factory=list
    )  # path, headers, body


def _handler(receiver: OtlpMetricsReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            receiver.raw.append((self.path, dict(self.headers.items()), body))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/metrics":
                self.send_error(404)
                return
            if self.headers.get("Content-Type") != "application/x-protobuf":
                self.send_error(415)
                return
            request = ExportMetricsServiceRequest()
            try:
                request.ParseFromString(body)
            except DecodeError:
                self.send_error(400)
                return
            receiver.requests.append(request)
            answer = ExportMetricsServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

    return Handler


@contextmanager
def otlp_metrics_receiver() -> Iterator[OtlpMetricsReceiver]:
    """A receiver on a free loopback port, for the duration of the block."""
    receiver = OtlpMetricsReceiver(url="")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
