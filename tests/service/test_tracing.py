"""Traces leave the real server over OTLP/HTTP to a real (in-test) OTLP receiver: an incoming
traceparent continues the trace, and the database call is a child span of the request's span."""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.support.service_fixtures import Serve

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


class Receiver(ThreadingHTTPServer):
    spans: list[Any]


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                self.server.spans.extend(scope.spans)
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver(("127.0.0.1", 0), _Handler)
    server.spans = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_request_and_database_spans_continue_the_callers_trace(receiver: Receiver, serve: Serve) -> None:
    endpoint = f"http://127.0.0.1:{receiver.server_address[1]}"
    server = serve(
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
        OTEL_BSP_SCHEDULE_DELAY="100",
        OTEL_SERVICE_NAME="metastore-test",
    )
    try:
        with server.client() as http:
            response = http.post(
                "/api/v1/lineage",
                json={
                    "eventTime": "2024-01-01T00:00:00Z",
                    "run": {"runId": "traced"},
                    "job": {"namespace": "j", "name": "n"},
                },
                headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01", "X-Request-ID": "traced-request"},
            )
            assert response.status_code == 201
            refused = http.post(
                "/api/v1/lineage",
                content=b"{}",
                headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01", "X-Request-ID": "traced-rejection"},
            )
            assert refused.status_code == 400
        deadline = time.monotonic() + 10
        while not any(s.parent_span_id.hex() == PARENT_ID for s in receiver.spans):
            assert time.monotonic() < deadline, "no span arrived at the OTLP receiver"
            time.sleep(0.1)
        server_span = next(s for s in receiver.spans if s.parent_span_id.hex() == PARENT_ID)
        assert server_span.trace_id.hex() == TRACE_ID
        assert "/api/v1/lineage" in server_span.name

        def statement(span: Any) -> str:
            return next((a.value.string_value for a in span.attributes if a.key == "db.statement"), "")

        # Children: the pool's connection check (an empty query), then the ingest call.
        while not any("metastore.ingest_event" in statement(s) for s in receiver.spans):
            assert time.monotonic() < deadline, "no database span for the ingest call"
            time.sleep(0.1)
        db_span = next(s for s in receiver.spans if "metastore.ingest_event" in statement(s))
        assert db_span.parent_span_id == server_span.span_id
        assert db_span.trace_id.hex() == TRACE_ID
        logged = [json.loads(line) for line in server.log_lines() if "traced-rejection" in line]
        assert logged and all(entry["trace_id"] == TRACE_ID for entry in logged)
    finally:
        assert server.stop() == 0
