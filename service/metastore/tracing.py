"""OpenTelemetry: server spans from opentelemetry-instrumentation-sanic, database spans
from the psycopg instrumentation, exported over OTLP when the standard OTEL_* variables
ask for it (OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint is set)."""

from __future__ import annotations

import logging
import os

log = logging.getLogger("metastore.tracing")

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
    _configured = True
    from opentelemetry import trace
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.instrumentation.sanic import SanicInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if not exporter_wanted():
        return  # no spans at all: nothing would read them, and each costs time on the hot path
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    name = os.environ.get("OTEL_SERVICE_NAME", "metastore")
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    log.info("exporting traces over OTLP")
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
