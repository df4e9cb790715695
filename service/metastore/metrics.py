"""Prometheus metrics of the service's own behaviour, served at GET /metrics.

The service runs one process per pod (scale out with replicas), so the default registry
is exact; prometheus-client's multiprocess mode would be needed only with several workers.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

EVENT_TYPES = frozenset({"START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"})

EVENTS = Counter(
    "metastore_events_total",
    "OpenLineage events by outcome: received, stored, duplicate, rejected (reason: SQLSTATE).",
    ["outcome", "reason", "event_type"],
)
REQUESTS = Histogram(
    "metastore_http_request_duration_seconds",
    "HTTP request latency by route and status.",
    ["method", "route", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
DB_CALLS = Histogram(
    "metastore_db_call_duration_seconds",
    "Database call latency by query and result (ok, error, timeout).",
    ["query", "result"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
QUEUE_DEPTH = Gauge("metastore_async_queue_events", "Async mode: events accepted and not yet stored.")
QUEUE_BYTES = Gauge("metastore_async_queue_bytes", "Async mode: bytes of events accepted and not yet stored.")
QUEUE_FULL = Counter(
    "metastore_async_queue_full_total",
    "Async mode: events that found the queue full, by what was done (sync, waited, rejected).",
    ["action"],
)
QUEUE_LOST = Counter(
    "metastore_async_events_lost_total", "Async mode: accepted events not stored when shutdown ran out of time."
)
WRITER_RETRIES = Counter("metastore_async_writer_retries_total", "Async mode: batches retried after a database error.")
POOL = Gauge("metastore_db_pool_connections", "Database pool connections by state.", ["state"])
READY = Gauge("metastore_ready", "1 when the last readiness check passed, else 0.")
TLS_RELOADS = Counter("metastore_tls_reloads_total", "Certificate reloads by result.", ["result"])


def event_type_label(event_type: str | None) -> str:
    # Bounded label values: whatever a producer sends, at most eight series.
    if event_type is None:
        return "none"
    return event_type if event_type in EVENT_TYPES else "other"


def count_event(outcome: str, error_code: str | None, event_type: str | None) -> None:
    EVENTS.labels(outcome, error_code or "", event_type_label(event_type)).inc()


# Issue 13 (trust boundaries).
TLS_CERT_EXPIRY = Gauge(
    "metastore_tls_certificate_expiry_timestamp_seconds", "Expiry (notAfter) of the served TLS certificate, Unix time."
)
DATABASE_TLS = Gauge(
    "metastore_database_tls_verified",
    "1 when the database connection verifies the server's certificate and name (sslmode=verify-full), else 0; "
    "sslmode is the effective mode.",
    ["sslmode"],
)
HTTP_REFUSED = Counter(
    "metastore_http_refused_total",
    "Requests refused before reaching a route: bad_header_name, te_and_cl, media_type, nul_in_query.",
    ["reason"],
)
