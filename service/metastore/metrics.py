"""Prometheus metrics of the service's own behaviour, served at GET /metrics.

The service runs one process per pod (scale out with replicas), so the default registry
is exact; prometheus-client's multiprocess mode would be needed only with several workers.
Every label takes its values from a fixed set, whatever clients send: a scrape stays small.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, Info

from metastore import __version__

EVENT_TYPES = frozenset({"START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"})
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})

EVENTS = Counter(
    "metastore_events_total",
    "OpenLineage events by final outcome (each event counted once): stored, duplicate, rejected "
    "(reason: SQLSTATE or HTTP status), unstorable (accepted, then refused by the database alone: "
    "kept in rejected_events).",
    ["outcome", "reason", "event_type"],
)
ACCEPTED = Counter(
    "metastore_events_accepted_total",
    "Events answered 202 before they were stored, by where they waited: memory or spool.",
    ["into"],
)
REQUESTS = Histogram(
    "metastore_http_request_duration_seconds",
    "HTTP request latency by route and status.",
    ["method", "route", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 1.5, 2.5, 5, 10),
)
DB_CALLS = Histogram(
    "metastore_db_call_duration_seconds",
    "Database call latency by query and result (ok, error, timeout).",
    ["query", "result"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
GROUP_SIZE = Histogram(
    "metastore_ingest_group_size",
    "Sync mode: events stored by one database call (group commit of concurrent POSTs; a split group's parts "
    "count each).",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 1024),
)
GROUP_SPLITS = Counter(
    "metastore_ingest_group_splits_total",
    "Sync mode: groups split in two after failing as a whole, so that one event's failure stays its own.",
)
DEADLINE_MISSED = Counter(
    "metastore_ingest_deadline_missed_total",
    "Sync mode: events not stored within the ingest budget (answered 503, or spooled), by lane: group "
    "(events up to METASTORE_LARGE_EVENT_BYTES) or large.",
    ["lane"],
)
LARGE_WAITING = Gauge(
    "metastore_ingest_large_waiting", "Sync mode: large events received and waiting for their turn to be stored."
)
BREAKER_OPEN = Gauge(
    "metastore_ingest_breaker_open",
    "1 while the ingest circuit breaker is open (the database failed three requests in a row and answered no "
    "other meanwhile), else 0.",
)
QUEUE_DEPTH = Gauge("metastore_async_queue_events", "Events accepted and not yet stored.")
QUEUE_BYTES = Gauge("metastore_async_queue_bytes", "Bytes of accepted events held in memory, not yet stored.")
QUEUE_AGE = Gauge(
    "metastore_async_queue_oldest_age_seconds", "How long the oldest event accepted and not yet stored has waited."
)
QUEUE_FULL = Counter(
    "metastore_async_queue_full_total",
    "Async mode: events that found the queue full, by what was done (sync, rejected).",
    ["action"],
)
QUEUE_LOST = Counter(
    "metastore_async_events_lost_total",
    "Accepted events not stored when shutdown ran out of time and no spool keeps them.",
)
WRITER_RETRIES = Counter("metastore_async_writer_retries_total", "Writer batches retried after a database error.")
WRITER_SPLITS = Counter("metastore_async_writer_splits_total", "Writer batches split in two after failing as a whole.")
SPOOL_BYTES = Gauge("metastore_spool_bytes", "Bytes of spool segment files on disk.")
SPOOL_SYNC = Histogram(
    "metastore_spool_fsync_duration_seconds",
    "Time to write and fsync a group of spooled events.",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
)
SPOOL_WRITABLE = Gauge(
    "metastore_spool_writable",
    "1 while the spool's last write (or probe write) succeeded; 0 after a failed one, until a write succeeds.",
)
SPOOL_WRITE_FAILURES = Counter(
    "metastore_spool_write_failures_total",
    "Group writes to the spool that failed (disk full, I/O error): undone, and their events refused.",
)
SPOOL_QUARANTINED = Counter(
    "metastore_spool_quarantined_total",
    "Damaged stretches of spool segments skipped and copied into the quarantine directory, by damage: torn "
    "(a record cut short at the end of the newest segment by a crash, never acknowledged) or corrupt (bytes "
    "that changed on disk; the records in them are lost).",
    ["damage"],
)
# At 0 from the start: an alert's increase() then sees the first damaged record found at run time.
for _damage in ("torn", "corrupt"):
    SPOOL_QUARANTINED.labels(_damage)
SPOOL_QUARANTINE_BYTES = Gauge(
    "metastore_spool_quarantine_bytes", "Bytes in the spool's quarantine directory (kept for inspection)."
)
POOL = Gauge(
    "metastore_db_pool_connections", "Open database connections by pool and state (idle, busy).", ["pool", "state"]
)
REPLICA_LAG = Gauge(
    "metastore_read_replica_lag_seconds",
    "With METASTORE_READ_REPLICA_URL: how far behind the primary the read replica is at most, measured by WAL "
    "position each second (+Inf: not known, e.g. the replica does not answer).",
)
REPLICA_USABLE = Gauge(
    "metastore_read_replica_usable",
    "With METASTORE_READ_REPLICA_URL: 1 while reads are served from the replica (within "
    "METASTORE_READ_REPLICA_MAX_LAG_S of the primary), 0 while they go to the primary.",
)
REPLICA_FALLBACKS = Counter(
    "metastore_read_replica_fallbacks_total",
    "With METASTORE_READ_REPLICA_URL: reads served by the primary instead of the replica, by reason: lagging "
    "(beyond METASTORE_READ_REPLICA_MAX_LAG_S), unavailable (does not answer), not_standby (not in recovery), "
    "error (the read failed on the replica and was answered by the primary).",
    ["reason"],
)
for _reason in ("lagging", "unavailable", "not_standby", "error"):
    REPLICA_FALLBACKS.labels(_reason)
POOL_WAITING = Gauge("metastore_db_pool_waiting_requests", "Requests waiting for a connection, by pool.", ["pool"])
CONNECTIONS = Gauge("metastore_http_connections", "Client connections open.")
REFUSED = Counter(
    "metastore_http_refused_total",
    "Requests or connections refused, by reason: to stay within bounds (connections, inflight_bytes, "
    "request_deadline, spool_full, spool_unwritable, database_failing) or before reaching a route (bad_header_name, "
    "bad_header_value, bad_content_length, te_and_cl, bad_host, media_type, nul_in_query).",
    ["reason"],
)
INFLIGHT = Gauge(
    "metastore_http_inflight_bytes",
    "Request bytes held now: as received, as inflated, and until the database call that carries them ends.",
)
PARTITIONS_AHEAD = Gauge(
    "metastore_partitions_ahead_days",
    "Whole days after today with their daily partition (14 after the hourly maintenance; -1: not even today).",
)
READY = Gauge("metastore_ready", "1 when the last readiness check passed, else 0.")
SCHEMA_VERSION = Gauge("metastore_schema_version", "Schema version the last readiness check read from the database.")
BUILD = Info("metastore_build", "The running release.")
BUILD.info({"version": __version__})
TLS_RELOADS = Counter("metastore_tls_reloads_total", "Certificate reloads by result.", ["result"])
TLS_CERT_EXPIRY = Gauge(
    "metastore_tls_certificate_expiry_timestamp_seconds", "Expiry (notAfter) of the served TLS certificate, Unix time."
)
TLS_CERT_NOT_BEFORE = Gauge(
    "metastore_tls_certificate_not_before_timestamp_seconds",
    "Start (notBefore) of the served TLS certificate's validity, Unix time: with the expiry, its lifetime.",
)
DATABASE_TLS = Gauge(
    "metastore_database_tls_verified",
    "1 when the database connection verifies the server's certificate and name (sslmode=verify-full), else 0; "
    "sslmode is the effective mode.",
    ["sslmode"],
)


def event_type_label(event_type: str | None) -> str:
    # Bounded label values: whatever a producer sends, at most eight series.
    if event_type is None:
        return "none"
    return event_type if event_type in EVENT_TYPES else "other"


def method_label(method: str) -> str:
    return method if method in METHODS else "other"


def count_event(outcome: str, error_code: str | None, event_type: str | None) -> None:
    EVENTS.labels(outcome, error_code or "", event_type_label(event_type)).inc()
