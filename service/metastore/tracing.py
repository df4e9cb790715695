"""OpenTelemetry: server spans from opentelemetry-instrumentation-sanic, database spans
from the psycopg instrumentation, exported over OTLP when the standard OTEL_* variables
ask for it (OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint is set).

OTEL_EXPORTER_OTLP_TRACES_PROTOCOL (or OTEL_EXPORTER_OTLP_PROTOCOL) chooses the transport:
`http/protobuf` (the default, port 4318) or `grpc` (port 4317). Anything else, `http/json`
included (no Python exporter speaks it), refuses the start rather than exporting nothing."""

from __future__ import annotations

import logging
import os

log = logging.getLogger("metastore.tracing")

PROTOCOLS = ("http/protobuf", "grpc")


class TracingConfigError(ValueError):
    """An OTEL_* setting the service cannot honour; the message names it."""


def protocol() -> str:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = os.environ.get(name, "").strip().lower()
        if value:
            if value not in PROTOCOLS:
                raise TracingConfigError(f"{name}={value!r}: use {' or '.join(PROTOCOLS)}")
            return value
    return "http/protobuf"


_configured = False


def exporter_wanted() -> bool:
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none" or os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    return exporter == "otlp" or any(
        os.environ.get(v) for v in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def setup() -> None:
    """Must run before the Sanic app is constructed (the instrumentor patches Sanic.__init__)
    and before the pool opens (the psycopg one wraps connect)."""
    global _configured
    if _configured:
        return
    wanted = exporter_wanted()
    transport = protocol() if wanted else ""  # refuses an unknown protocol before anything starts
    _configured = True
    from opentelemetry import trace
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.instrumentation.sanic import SanicInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

    if not wanted:
        return  # no spans at all: nothing would read them, and each costs time on the hot path
    exporter: SpanExporter
    if transport == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        exporter = GrpcExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        exporter = HttpExporter()

    name = os.environ.get("OTEL_SERVICE_NAME", "metastore")
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    log.info("exporting traces over OTLP (%s)", transport)
    SanicInstrumentor().instrument(tracer_provider=provider, excluded_urls="/healthz,/readyz,/metrics")
    PsycopgInstrumentor().instrument(tracer_provider=provider, skip_dep_check=True)


def shutdown() -> None:
    if not _configured:
        return
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    flush = getattr(provider, "shutdown", None)
    if flush:
        flush()
