"""The derived tables as comparable values (by natural keys, dataset ids aside), the same events
ingested live in a database of their own to compare with, and a rebuild stopped midway."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import psycopg

from tests.conftest import Database, create_database, drop_database
from tests.support.generated import allow_two_weeks_ahead
from tests.support.ingesting import ingest_all


def stored_column_lineage(conn: psycopg.Connection[Any]) -> set[tuple[Any, ...]]:
    return set(
        conn.execute(
            "SELECT o.namespace, o.name, nullif(c.output_field, ''), i.namespace, i.name, c.input_field,"
            " c.transformation_type, c.transformation_subtype"
            " FROM metastore.column_lineage c"
            " JOIN metastore.datasets o ON o.id = c.output_dataset_id"
            " JOIN metastore.datasets i ON i.id = c.input_dataset_id"
        ).fetchall()
    )


def derived_snapshot(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """The derived tables by natural keys (dataset ids aside)."""
    return {
        "schemas": conn.execute(
            "SELECT d.namespace, d.name, v.fields_sha256, v.fields, e.payload_sha256, v.first_seen, v.last_seen"
            " FROM metastore.dataset_schema_versions v JOIN metastore.datasets d ON d.id = v.dataset_id"
            " JOIN metastore.events e ON e.id = v.first_event_id ORDER BY 1, 2, 3"
        ).fetchall(),
        "edges": conn.execute(
            "SELECT u.namespace, u.name, w.namespace, w.name, e.job_namespace, e.job_name, e.first_seen, e.last_seen"
            " FROM metastore.lineage_edges e JOIN metastore.datasets u ON u.id = e.upstream_id"
            " JOIN metastore.datasets w ON w.id = e.downstream_id ORDER BY 1, 2, 3, 4, 5, 6"
        ).fetchall(),
        "columns": sorted(stored_column_lineage(conn), key=repr),
    }


def snapshot(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Derived state by natural keys (ids of datasets aside)."""
    return {
        "datasets": conn.execute(
            "SELECT namespace, name, scheme, authority, kind, first_seen, last_seen, input_events, output_events "
            "FROM metastore.datasets_view ORDER BY 1, 2"
        ).fetchall(),
        "links": conn.execute(
            "SELECT e.payload_sha256, d.namespace, d.name, l.direction, l.event_time, "
            "regexp_replace(l.tableoid::regclass::text, '_[0-9]+$', '') "
            "FROM metastore.event_datasets l "
            "JOIN metastore.events e ON e.id = l.event_id AND e.event_time = l.event_time "
            "JOIN metastore.datasets d ON d.id = l.dataset_id ORDER BY 1, 2, 3, 4"
        ).fetchall(),
        "symlinks": conn.execute(
            "SELECT c.namespace, c.name, s.namespace, s.name, y.type FROM metastore.dataset_symlinks y "
            "JOIN metastore.datasets c ON c.id = y.dataset_id JOIN metastore.datasets s ON s.id = y.symlink_id "
            "ORDER BY 1, 2, 3, 4, 5"
        ).fetchall(),
    }


def whole(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Every derived table by natural keys: datasets, links, symlinks, the dataset layer, jobs and runs."""
    return {
        **snapshot(conn),
        **derived_snapshot(conn),
        "jobs": conn.execute(
            "SELECT namespace, name, first_seen, last_seen, latest_sql, sql_dialect, processing_type, job_type"
            " FROM metastore.jobs ORDER BY 1, 2"
        ).fetchall(),
        "runs": conn.execute(
            "SELECT j.namespace, j.name, r.run_id, r.state, r.state_time, r.started_at, r.ended_at, r.error_message,"
            " r.first_event_time, r.last_event_time, r.event_count"
            " FROM metastore.runs r JOIN metastore.jobs j ON j.id = r.job_id ORDER BY 1, 2, 3"
        ).fetchall(),
    }


def dangling(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
    """Rows that point at no dataset or job (no foreign key guards them: the derivations do)."""
    row = conn.execute(
        # Not correlated: Citus joins its distributed links with the local datasets only so.
        "SELECT (SELECT count(*) FROM metastore.event_datasets l"
        "         WHERE l.dataset_id NOT IN (SELECT d.id FROM metastore.datasets d)),"
        "       (SELECT count(*) FROM metastore.dataset_symlinks s WHERE NOT EXISTS"
        "         (SELECT FROM metastore.datasets d WHERE d.id = s.dataset_id)"
        "         OR NOT EXISTS (SELECT FROM metastore.datasets d WHERE d.id = s.symlink_id)),"
        "       (SELECT count(*) FROM metastore.runs r"
        "         WHERE NOT EXISTS (SELECT FROM metastore.jobs j WHERE j.id = r.job_id)),"
        "       (SELECT count(*) FROM metastore.dataset_activity a"
        "         WHERE NOT EXISTS (SELECT FROM metastore.datasets d WHERE d.id = a.dataset_id))"
    ).fetchone()
    assert row is not None
    return tuple(row)


def reference(
    pg_server: Any,
    events: list[Any],
    prepare: Callable[[str], None] = allow_two_weeks_ahead,
    read: Callable[[psycopg.Connection[Any]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The same events ingested live only, in a database of their own that `prepare` (given the
    owner's DSN) sets up first, read back by `read` (whole, unless given)."""
    read = read or whole
    db = create_database(pg_server)
    try:
        prepare(db.owner_dsn)
        ingest_all(db.service_dsn, events)
        with psycopg.connect(db.owner_dsn, autocommit=True) as conn:
            return read(conn)
    finally:
        drop_database(db)


def collect_notices(conn: psycopg.Connection[Any]) -> list[str]:
    """The list the notices `conn` receives from now on are appended to (their primary message)."""
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    return notices


def stop_midway(database: Database, batch_size: int) -> None:
    """A backfill session cancelled once it has derived some ranges, as a crash or a cancel leaves it."""
    with psycopg.connect(database.owner_dsn, autocommit=True) as session:
        pid = session.info.backend_pid
        caught: list[BaseException] = []

        def call() -> None:
            try:
                session.execute("CALL metastore.backfill(%s)", (batch_size,))
            except BaseException as exc:
                caught.append(exc)

        thread = threading.Thread(target=call)
        thread.start()
        with psycopg.connect(database.owner_dsn, autocommit=True) as watch:
            started = None
            for _ in range(600):
                left = watch.execute("SELECT count(*) FROM metastore.rebuild_ranges").fetchone()[0]  # type: ignore[index]
                started = started or (left if left else None)
                if started and left < started - 10:
                    break
                threading.Event().wait(0.02)
            watch.execute("SELECT pg_cancel_backend(%s::integer)", (pid,))
        thread.join(60)
        assert caught and isinstance(caught[0], psycopg.errors.QueryCanceled), caught


def event_links(conn: psycopg.Connection[Any], event_id: int) -> set[tuple[Any, ...]]:
    """(namespace, name, direction) of each dataset the event is linked to."""
    return set(
        conn.execute(
            "SELECT d.namespace, d.name, l.direction FROM metastore.event_datasets l "
            "JOIN metastore.datasets d ON d.id = l.dataset_id WHERE l.event_id = %s",
            (event_id,),
        ).fetchall()
    )
