"""OTLP over gRPC to a real (in-test) gRPC collector, and a refusal at start for a protocol the
service cannot speak: traces are never silently dropped."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from tests.conftest import Database
from tests.support.eventually import eventually
from tests.support.service_fixtures import Serve

TRACE_ID = "5bf92f3577b34da6a3ce929d0e0e4736"


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans: list[Any] = []

    def Export(self, request: Any, context: Any) -> Any:
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                self.spans.extend(scope.spans)
        return trace_service_pb2.ExportTraceServiceResponse()


@pytest.fixture
def collector() -> Iterator[tuple[Collector, int]]:
    servicer = Collector()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, port
    server.stop(grace=None)


def test_spans_arrive_over_grpc(collector: tuple[Collector, int], serve: Serve) -> None:
    servicer, port = collector
    server = serve(
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
        OTEL_EXPORTER_OTLP_INSECURE="true",
        OTEL_BSP_SCHEDULE_DELAY="100",
    )
    try:
        with server.client() as http:
            response = http.get("/api/v1/datasets", headers={"traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01"})
            assert response.status_code == 200
        eventually(
            lambda: any(s.trace_id.hex() == TRACE_ID for s in servicer.spans),
            timeout=15,
            interval=0.1,
            what="a span at the gRPC collector",
        )
        assert any("exporting traces over OTLP (grpc)" in line for line in server.log_lines())
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"])
def test_a_protocol_the_service_cannot_speak_refuses_the_start(database: Database, variable: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("METASTORE_", "OTEL_"))}
    env.update(
        {
            "METASTORE_DATABASE_URL": database.service_dsn,
            "METASTORE_TLS": "off",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
            variable: "http/json",
        }
    )
    result = subprocess.run(
        [sys.executable, "-m", "metastore", "serve"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert variable in result.stderr and "grpc" in result.stderr
