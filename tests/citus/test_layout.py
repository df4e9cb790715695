"""The layout a deploy gives on Citus (V0010), as the roles of docs/operations.md use it: raw events
and their links spread over both workers, derived tables on the coordinator, the append-only
guard on every shard, a second installation in the same cluster, a revert and a deploy again."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
import pytest
from psycopg import sql

from devtools.citus import CitusCluster
from metastore import ledger, migrations
from tests.conftest import Database, fixture_files, ingest, load_fixture
from tests.support.events import run_event

DISTRIBUTED = {"metastore.events", "metastore.event_datasets"}


def citus_tables(owner: psycopg.Connection[Any]) -> dict[str, tuple[str, str, int]]:
    """Parents (not partitions) of schema metastore that Citus knows: method, column, co-location."""
    rows = owner.execute(
        "SELECT p.logicalrelid::regclass::text, p.partmethod::text, column_to_column_name(p.logicalrelid, p.partkey),"
        " p.colocationid FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid"
        " WHERE c.relnamespace = 'metastore'::regnamespace AND NOT c.relispartition"
    ).fetchall()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def rows_per_node(owner: psycopg.Connection[Any], table: str) -> dict[int, int]:
    """Rows of a distributed table on each node that holds shards of it, counted on the node."""
    counts: dict[int, int] = {}
    for port, result in owner.execute(
        "SELECT nodeport, result FROM run_command_on_placements(%s, 'SELECT count(*) FROM %%s')", (table,)
    ):
        counts[port] = counts.get(port, 0) + int(result)
    return counts


def ingest_fixtures(service: psycopg.Connection[Any]) -> int:
    stored = 0
    for path in fixture_files():
        stored += ingest(service, load_fixture(path))[0] == "stored"
    return stored


def test_events_and_links_are_distributed_by_event_time_and_the_rest_stays_on_the_coordinator(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    tables = citus_tables(owner)
    assert set(tables) == DISTRIBUTED
    assert {t[:2] for t in tables.values()} == {("h", "event_time")}
    assert len({t[2] for t in tables.values()}) == 1, "co-located"
    # Every daily partition and the default one are distributed with their parent.
    undistributed = owner.execute(
        "SELECT i.inhrelid::regclass::text FROM pg_inherits i WHERE i.inhparent IN "
        "('metastore.events'::regclass, 'metastore.event_datasets'::regclass) "
        "AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = i.inhrelid)"
    ).fetchall()
    assert undistributed == []
    assert migrations.verify(database.owner_dsn) == []


def test_rows_of_events_and_links_lie_on_both_workers(
    cluster: CitusCluster, database: Database, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    stored = ingest_fixtures(service)
    for i in range(40):
        event = run_event(event_time=f"2024-05-01T12:{i:02d}:00Z", inputs=[f"s.in{i}"], outputs=[f"s.out{i}"])
        assert ingest(service, event)[0] == "stored"
    workers = {w.port for w in cluster.workers}
    for table, total in (("metastore.events", stored + 40), ("metastore.event_datasets", None)):
        counts = rows_per_node(owner, table)
        assert set(counts) == workers, f"{table}: shards on the workers only"
        assert all(n > 0 for n in counts.values()), f"{table}: rows on every worker, {counts}"
        qualified = sql.Identifier(*table.split("."))
        on_coordinator = owner.execute(sql.SQL("SELECT count(*) FROM {}").format(qualified)).fetchone()
        assert on_coordinator == (sum(counts.values()),)
        if total is not None:
            assert sum(counts.values()) == total


def test_the_append_only_trigger_refuses_the_owner_on_every_shard(
    database: Database, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    ingest_fixtures(service)
    for statement in ("UPDATE metastore.events SET producer = 'x'", "DELETE FROM metastore.events"):
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):  # 55000
            owner.execute(statement)
    assert owner.execute("SELECT count(*) FROM metastore.events WHERE producer = 'x'").fetchone() == (0,)
    # The service has no write on any table, shard or not.
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        service.execute("DELETE FROM metastore.events")


def test_revert_brings_the_events_back_to_the_coordinator_and_a_deploy_spreads_them_again(
    database: Database, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    stored = ingest_fixtures(service)
    before = owner.execute("SELECT count(*), sum(id) FROM metastore.events").fetchone()
    change = next(c.version for c in ledger.changes() if c.name.endswith("__citus_layout.sql"))
    previous = max(v for v in migrations.applied_versions(owner) if v < change)
    later = [c.version for c in ledger.changes() if c.version >= change]  # the feed's order (V0011) among them
    assert migrations.revert(database.owner_dsn, previous) == later[::-1]
    assert citus_tables(owner) == {}
    assert owner.execute("SELECT count(*), sum(id) FROM metastore.events").fetchone() == before
    # Reverted, the change is pending: verify says so.
    assert any("citus_layout" in f for f in migrations.verify(database.owner_dsn))

    assert migrations.deploy(database.owner_dsn) == later
    assert set(citus_tables(owner)) == DISTRIBUTED
    assert owner.execute("SELECT count(*), sum(id) FROM metastore.events").fetchone() == before
    assert migrations.verify(database.owner_dsn) == []
    # The events stored before the feed's order existed come first in it, each once.
    assert owner.execute("SELECT count(*), count(DISTINCT event_id) FROM metastore.feed_order").fetchone() == (
        stored,
        stored,
    )
    assert ingest(service, run_event(event_time="2024-05-02T00:00:00Z"))[0] == "stored"
    assert owner.execute("SELECT count(*) FROM metastore.events").fetchone() == (stored + 1,)
    service.execute("SELECT metastore.sequence_feed()")
    feed = [json.loads(r[0])["id"] for r in service.execute("SELECT event FROM metastore.read_events(1000)")]
    assert sorted(feed) == [r[0] for r in owner.execute("SELECT id FROM metastore.events ORDER BY id")]


def test_a_second_installation_in_the_cluster_deploys_as_its_own_owner(cluster: CitusCluster) -> None:
    """The first installation's roles (the template's) exist; a second database, set up as
    docs/operations.md says, deploys as its non-superuser owner and serves its own service only."""
    tag = uuid.uuid4().hex[:8]
    name, owner_role, service_role = f"lineage_{tag}", f"lineage_{tag}_owner", f"lineage_{tag}_svc"
    app, reader = migrations.default_group_roles(name)
    cluster.provision(name, owner_role, service_role)
    try:
        migrations.deploy(cluster.dsn_for(owner_role, name))
        assert migrations.verify(cluster.dsn_for(owner_role, name)) == []
        with psycopg.connect(cluster.dsn_for(service_role, name), autocommit=True) as conn:
            assert ingest(conn, run_event())[0] == "stored"
        with psycopg.connect(cluster.dsn_for(owner_role, name), autocommit=True) as conn:
            assert set(citus_tables(conn)) == DISTRIBUTED
            assert conn.execute("SELECT app_role, reader_role FROM metastore.group_roles").fetchone() == (app, reader)
        # The first installation's service may not connect to the second's database, on any node.
        for node in cluster.nodes:
            with pytest.raises(psycopg.OperationalError, match="permission denied"):
                psycopg.connect(node.dsn_for("metastore_service", name)).close()
    finally:
        cluster.drop_database(name)


def test_the_feed_refuses_rather_than_skip_events_where_its_order_is_not_deployed(
    database: Database, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """The order (transaction ids below the snapshot horizon) of one server does not hold over
    workers: with the feed's order of Citus reverted (V0011), read_events and forward_page answer
    0A000, for the service and the owner, with or without a cursor, rather than read in that order."""
    assert ingest_fixtures(service) > 0
    change = next(c.version for c in ledger.changes() if c.name.endswith("__citus_feed_order.sql"))
    previous = max(v for v in migrations.applied_versions(owner) if v < change)
    # Until the older release's deploy replaces them, this release's functions stay (all but V0011's own).
    assert migrations.revert(database.owner_dsn, previous)[-1] == change
    calls = [
        "SELECT * FROM metastore.read_events(10)",
        "SELECT * FROM metastore.read_events(10, 'MTox')",
        "SELECT * FROM metastore.forward_page(NULL, 10, 1000)",
        "SELECT * FROM metastore.forward_page('MTox', 10, 1000)",
    ]
    for conn in (service, owner):
        for call in calls:
            with pytest.raises(psycopg.errors.FeatureNotSupported) as caught:
                conn.execute(call)  # type: ignore[arg-type]
            assert caught.value.diag.message_hint and "docs/events.md" in caught.value.diag.message_hint
    # Ingest goes on without the pending rows.
    assert ingest(service, run_event(event_time="2024-05-03T00:00:00Z"))[0] == "stored"
    # The rest of the read path answers.
    assert service.execute("SELECT metastore.dataset_summary()").fetchone() is not None
