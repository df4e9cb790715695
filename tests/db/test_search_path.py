"""Owner code cannot be led astray by a search_path.

In a database where every role may create objects in schema public (what pg_upgrade leaves of a
PostgreSQL 14 or older), the application role plants functions, aggregates and operators in
public that would run with the rights of whoever calls them: each records that it ran and tries
to give the application role TRUNCATE on metastore.events. The owner then calls every function
and procedure of the schema, with the default search_path and with public ahead of pg_catalog,
and none of the planted code runs.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from tests.conftest import CITUS, SERVICE, Database, ingest
from tests.support.events import symlinked
from tests.support.generated import allow_two_weeks_ahead, generated_events

# Each shadow records its call, tries the escalation, then answers as the real one would, so
# that nothing fails before every shadow had its chance.
_RECORD = f"""
    INSERT INTO public.shadow_calls VALUES (%L);
    BEGIN
        GRANT TRUNCATE ON metastore.events TO {SERVICE};
    EXCEPTION WHEN OTHERS THEN NULL;  -- not the owner: no escalation, but the call is recorded
    END;
"""


def _shadow_function(signature: str, returns: str, body: str, label: str) -> str:
    record = _RECORD.replace("%L", "'" + label + "'")
    return (
        f"CREATE FUNCTION public.{signature} RETURNS {returns} LANGUAGE plpgsql "
        f"SET search_path = pg_catalog AS $$ BEGIN {record} RETURN {body}; END $$"
    )


SHADOWS = [
    "CREATE TABLE public.shadow_calls (name text)",
    "GRANT INSERT, SELECT ON public.shadow_calls TO PUBLIC",
    # The one of the report: a better match for format('%s[%s]', text, bigint) than pg_catalog's.
    _shadow_function(
        "format(f text, a text, b bigint)", "text", "pg_catalog.format(f, a, b)", "format(text,text,bigint)"
    ),
    _shadow_function("format(f text, a text)", "text", "pg_catalog.format(f, a)", "format(text,text)"),
    _shadow_function("format(f text, a text, b text)", "text", "pg_catalog.format(f, a, b)", "format(text,text,text)"),
    _shadow_function("format(f text)", "text", "pg_catalog.format(f)", "format(text)"),
    _shadow_function("lower(a text)", "text", "pg_catalog.lower(a)", "lower"),
    _shadow_function("left(a text, n integer)", "text", "pg_catalog.left(a, n)", "left"),
    _shadow_function("octet_length(a text)", "integer", "pg_catalog.octet_length(a)", "octet_length"),
    _shadow_function("jsonb_typeof(a jsonb)", "text", "pg_catalog.jsonb_typeof(a)", "jsonb_typeof"),
    _shadow_function("strpos(a text, b text)", "integer", "pg_catalog.strpos(a, b)", "strpos"),
    _shadow_function("sha256(a bytea)", "bytea", "pg_catalog.sha256(a)", "sha256"),
    _shadow_function("to_regclass(a text)", "regclass", "pg_catalog.to_regclass(a)", "to_regclass"),
    _shadow_function("set_config(a text, b text, c boolean)", "text", "pg_catalog.set_config(a, b, c)", "set_config"),
    # Aggregates: count(*), max(bigint).
    _shadow_function("shadow_count(s bigint)", "bigint", "s + 1", "count(*)"),
    "CREATE AGGREGATE public.count(*) (SFUNC = public.shadow_count, STYPE = bigint, INITCOND = '0')",
    _shadow_function("shadow_max(s bigint, v bigint)", "bigint", "greatest(s, v)", "max(bigint)"),
    "CREATE AGGREGATE public.max(bigint) (SFUNC = public.shadow_max, STYPE = bigint)",
    # Operators: exact matches of pg_catalog's (they win when public comes first), and #>> with a
    # text right side, which an unknown literal prefers over pg_catalog's text[] one.
    _shadow_function("shadow_eq(a text, b text)", "boolean", "a OPERATOR(pg_catalog.=) b", "= text"),
    "CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.shadow_eq)",
    _shadow_function("shadow_gt(a bigint, b bigint)", "boolean", "a OPERATOR(pg_catalog.>) b", "> bigint"),
    "CREATE OPERATOR public.> (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.shadow_gt)",
    _shadow_function("shadow_arrow(a jsonb, b text)", "jsonb", "a OPERATOR(pg_catalog.->) b", "-> jsonb"),
    "CREATE OPERATOR public.-> (LEFTARG = jsonb, RIGHTARG = text, FUNCTION = public.shadow_arrow)",
    _shadow_function("shadow_path(a jsonb, b text)", "text", "a OPERATOR(pg_catalog.#>>) ARRAY[b]", "#>> jsonb text"),
    "CREATE OPERATOR public.#>> (LEFTARG = jsonb, RIGHTARG = text, FUNCTION = public.shadow_path)",
]

EVENT = {
    "eventTime": "2024-03-01T10:00:00Z",
    "eventType": "COMPLETE",
    "run": {"runId": "r-owner"},
    "job": {"namespace": "j", "name": "owner"},
    "inputs": [symlinked("trino://h:8080", "s.owner_in", "hive://m", "s.t")],
    "outputs": [{"namespace": "trino://h:8080", "name": "s.owner_out"}],
}

# Every function and procedure of the schema, as the owner calls it with a loose search_path.
# Statements hold no operator and call nothing unqualified themselves.
CALLS: dict[str, str] = {
    "metastore.backfill(integer)": "CALL metastore.backfill(2)",
    "metastore.json_text(jsonb,text,integer,boolean)": "SELECT metastore.json_text(%(one)s::jsonb, 'x', 10, false)",
    "metastore.event_kind(jsonb)": "SELECT metastore.event_kind(%(event)s::jsonb)",
    "metastore.extract_datasets(jsonb)": "SELECT * FROM metastore.extract_datasets(%(event)s::jsonb)",
    "metastore.facet_text(jsonb)": "SELECT metastore.facet_text(%(one)s::jsonb)",
    "metastore.mention_key(text,text)": "SELECT metastore.mention_key(%(one)s, %(one)s)",
    "metastore.generation_least(integer,integer,timestamp with time zone,timestamp with time zone)": (
        "SELECT metastore.generation_least(1, 1, now(), now())"
    ),
    "metastore.generation_greatest(integer,integer,timestamp with time zone,timestamp with time zone)": (
        "SELECT metastore.generation_greatest(1, 1, now(), now())"
    ),
    # Raises what is wrong (22023), here through extract_datasets, its one caller.
    "metastore.malformed_datasets(jsonb,jsonb)": "SELECT * FROM metastore.extract_datasets(%(malformed)s::jsonb)",
    "metastore.dataset_key(text,text)": "SELECT metastore.dataset_key(%(one)s, %(one)s)",
    "metastore.roll_up_datasets(bigint[])": "SELECT metastore.roll_up_datasets()",
    "metastore.validate_event(jsonb)": "SELECT metastore.validate_event(%(event)s::jsonb)",
    "metastore.check_event(jsonb)": "SELECT metastore.check_event(%(bad)s::jsonb)",
    "metastore.store_events(jsonb[],metastore.valid_event[],text,text)": (
        "SELECT * FROM metastore.store_events(ARRAY[%(event2)s::jsonb],"
        " ARRAY[metastore.validate_event(%(event2)s::jsonb)])"
    ),
    "metastore.ingest_checked(bytea[],jsonb[],metastore.checked_event[],text,text)": (
        "SELECT * FROM metastore.ingest_checked(NULL, ARRAY[%(bad)s::jsonb],"
        " ARRAY[metastore.check_event(%(bad)s::jsonb)], 'unauthenticated', NULL)"
    ),
    "metastore.ingest_event(bytea,text,text)": "SELECT metastore.ingest_event(%(body)s::bytea)",
    "metastore.ingest_events(bytea[],text,text)": "SELECT * FROM metastore.ingest_events(ARRAY[%(body)s::bytea])",
    "metastore.ingest_batch(bytea,text,text)": "SELECT metastore.ingest_batch(%(batch)s::bytea)",
    "metastore.list_datasets(integer,text,text,text,text,text)": (
        "SELECT metastore.list_datasets(1, NULL, NULL, 'TRINO', 'dataset', 'OWNER')"
    ),
    "metastore.get_dataset(bigint,integer)": (
        "SELECT metastore.get_dataset((SELECT pg_catalog.min(v.id) FROM metastore.datasets_view AS v), 5)"
    ),
    "metastore.dataset_summary(integer)": "SELECT metastore.dataset_summary()",
    "metastore.derive_lineage(bigint[],jsonb[],metastore.valid_event[],jsonb)": (
        "SELECT metastore.derive_lineage(ARRAY[1::bigint], ARRAY[%(event)s::jsonb],"
        " ARRAY[metastore.validate_event(%(event)s::jsonb)])"
    ),
    "metastore.dataset_aliases(bigint[],integer)": "SELECT metastore.dataset_aliases(ARRAY[1::bigint], 10)",
    "metastore.dataset_layer(bigint)": (
        "SELECT metastore.dataset_layer((SELECT pg_catalog.min(v.id) FROM metastore.datasets_view AS v))"
    ),
    "metastore.datasets_with_field(text,integer)": "SELECT metastore.datasets_with_field('id', 10)",
    "metastore.datasets_with_field_among(bigint[],text,integer)": (
        "SELECT metastore.datasets_with_field_among(ARRAY[1::bigint], 'id', 10)"
    ),
    "metastore.dataset_lineage(bigint,text,integer,integer)": (
        "SELECT metastore.dataset_lineage((SELECT pg_catalog.min(v.id) FROM metastore.datasets_view AS v),"
        " 'both', 3, 50)"
    ),
    "metastore.schema_version()": "SELECT metastore.schema_version()",
    "metastore.create_partitions(date,integer)": "SELECT metastore.create_partitions()",
    "metastore.apply_retention(interval)": "SELECT metastore.apply_retention('3650 days')",
    "metastore.expiring_days(interval)": "SELECT count(*) FROM metastore.expiring_days('3650 days')",
    "metastore.group_role(text)": "SELECT metastore.group_role('app')",
    "metastore.use_group_roles(text,text)": "SELECT metastore.use_group_roles()",
    "metastore.check_source(text,text)": "SELECT metastore.check_source('unauthenticated', NULL)",
    "metastore.json_has_unique_keys(text,jsonb)": (
        "SELECT metastore.json_has_unique_keys('{\"a\": 1}', '{\"a\": 1}'::jsonb)"
    ),
    "metastore.read_event(bytea)": "SELECT * FROM metastore.read_event(%(body)s::bytea)",
    "metastore.record_rejection(bytea,text,text,text,text)": (
        "SELECT metastore.record_rejection(%(body)s::bytea, '22023', 'why', 'unauthenticated', NULL)"
    ),
    "metastore.reject_event(bytea,text,text,text,text)": (
        "SELECT metastore.reject_event(%(body)s::bytea, '22023', 'why', 'unauthenticated', NULL)"
    ),
    "metastore.ensure_partitions()": "SELECT metastore.ensure_partitions()",
    "metastore.write_probe()": "SELECT metastore.write_probe()",
    "metastore.partitions_ahead()": "SELECT metastore.partitions_ahead()",
    "metastore.read_events(integer,text,text,text,text,text,text,text,text,text,text)": (
        "SELECT * FROM metastore.read_events(10, NULL, NULL, NULL, NULL, NULL, 'n', NULL, 'trino://h', NULL, NULL)"
    ),
    "metastore.forward_claim(text,text,integer)": "SELECT * FROM metastore.forward_claim('sp', 'owner', 30)",
    "metastore.forward_ack(text,text,text,integer,integer,text)": (
        "SELECT metastore.forward_ack('sp', 'owner', NULL, 0, 0, 'why')"
    ),
    "metastore.forward_status()": "SELECT metastore.forward_status()",
    "metastore.forward_key(text)": "SELECT metastore.forward_key('https://u:p@h/api/v1/lineage?t=1')",
    "metastore.forward_position(text)": "SELECT * FROM metastore.forward_position(NULL)",
    "metastore.sequence_feed()": "SELECT metastore.sequence_feed()",
    "metastore.feed_seq(text)": "SELECT metastore.feed_seq(NULL)",
    "metastore.feed_sequenced()": "SELECT metastore.feed_sequenced()",
    "metastore.read_sequenced_events(integer,text,timestamp with time zone,timestamp with time zone,"
    "timestamp with time zone,timestamp with time zone,text,text,text,text,text)": (
        "SELECT * FROM metastore.read_sequenced_events(10, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"
    ),
    "metastore.forward_page(text,integer,integer)": "SELECT * FROM metastore.forward_page(NULL, 2, 100)",
    "metastore.forward_refused(text,text,bigint,text,integer,text)": (
        "SELECT metastore.forward_refused('sp', 'owner', 1, 'MDox', 400, 'why')"
    ),
    "metastore.forward_remove(text)": "SELECT metastore.forward_remove('sp-gone')",
    "metastore.derive_datasets(bigint[],metastore.valid_event[],boolean)": (
        "SELECT metastore.derive_datasets(ARRAY[1::bigint], ARRAY[metastore.validate_event(%(event)s::jsonb)], true)"
    ),
    "metastore.derive_generation()": "SELECT metastore.derive_generation()",
    "metastore.lock_events_briefly()": "SELECT metastore.lock_events_briefly()",
    "metastore.fold_rebuilt_datasets(bigint[],integer)": (
        "SELECT metastore.fold_rebuilt_datasets(ARRAY(SELECT v.id FROM metastore.datasets_view AS v),"
        " (SELECT s.generation FROM metastore.derive_state AS s))"
    ),
    "metastore.derive_job_run(jsonb[],metastore.valid_event[])": (
        "SELECT metastore.derive_job_run(ARRAY[%(event)s::jsonb],"
        " ARRAY[ROW('run', 'COMPLETE', now(), 'r-owner-5', 'n', 'j', NULL, NULL, NULL)::metastore.valid_event])"
    ),
    "metastore.list_jobs(integer,text,text,text)": "SELECT metastore.list_jobs(1, NULL, NULL, 'J')",
    "metastore.get_job(bigint,integer)": (
        "SELECT metastore.get_job((SELECT pg_catalog.min(v.id) FROM metastore.jobs_view AS v), 5)"
    ),
    "metastore.get_run(bigint)": (
        "SELECT metastore.get_run((SELECT pg_catalog.min(v.id) FROM metastore.runs_view AS v))"
    ),
    "metastore.dataset_runs(bigint,integer)": (
        "SELECT metastore.dataset_runs((SELECT pg_catalog.min(v.id) FROM metastore.datasets_view AS v), 5)"
    ),
    "metastore.derive_run_datasets(metastore.valid_event[],jsonb)": (
        "SELECT metastore.derive_run_datasets(ARRAY[metastore.validate_event(%(event)s::jsonb)], '{}'::jsonb)"
    ),
    "metastore.hidden_names()": "SELECT * FROM metastore.hidden_names()",
    "metastore.hide(text,text,text,text)": "SELECT metastore.hide('namespace', 'hidden-by-the-test', NULL, 'why')",
    "metastore.unhide(text,text,text)": "SELECT metastore.unhide('namespace', 'hidden-by-the-test')",
    "metastore.hidden_list(boolean)": "SELECT metastore.hidden_list(true)",
    "metastore.list_jobs(integer,text,text,text,text,text,text)": (
        "SELECT metastore.list_jobs(1, NULL, NULL, 'J', 'latest_run', 'complete', 'u')"
    ),
    "metastore.list_runs(integer,text,text,text,text,text,bigint,text,text)": (
        "SELECT metastore.list_runs(5, NULL, 'COMPLETE,FAIL', NULL, NULL, 'n',"
        " (SELECT pg_catalog.min(v.id) FROM metastore.datasets_view AS v), '2020-01-01', NULL)"
    ),
    "metastore.lineage_graph(bigint,text,integer,integer,text)": (
        "SELECT metastore.lineage_graph((SELECT pg_catalog.min(v.id) FROM metastore.datasets_view AS v),"
        " 'both', 3, 50, 'jobs')"
    ),
    "metastore.field_lineage(bigint,text,text,integer,integer)": (
        "SELECT metastore.field_lineage((SELECT pg_catalog.min(v.id) FROM metastore.datasets_view AS v),"
        " 'id', 'both', 3, 50)"
    ),
    "metastore.search(text,integer)": "SELECT metastore.search('Owner_', 10)",
    "metastore.search_substrings(text,text,integer,integer,integer,bigint[],bigint[],text[])": (
        "SELECT * FROM metastore.search_substrings('wner', 'wner', 10, 100, 100, '{}', '{}', '{}')"
    ),
    "metastore.list_namespaces(integer)": "SELECT metastore.list_namespaces(10)",
    # Inlined SQL functions (every name qualified), as the search indexes and metastore.search call them.
    "metastore.search_key(text)": "SELECT metastore.search_key(%(one)s)",
    "metastore.name_tail(text)": "SELECT metastore.name_tail('a.b/c.d')",
    # A trigger function: reached through a new schema version.
    "metastore.note_field_names()": (
        "INSERT INTO metastore.dataset_schema_versions (dataset_id, fields_sha256, fields, first_event_id,"
        " first_seen, last_seen) VALUES ((SELECT pg_catalog.min(v.id) FROM metastore.datasets_view AS v),"
        " '\\x00', '[{\"name\": \"noted\"}]', 1, pg_catalog.now(), pg_catalog.now())"
    ),
    # Trigger functions: reached through triggers that refuse (55000).
    "metastore.forbid_change()": "DELETE FROM metastore.events",
    "metastore.settings_keep_row()": "DELETE FROM metastore.settings",
}


@pytest.fixture
def planted(database: Database, service: psycopg.Connection[Any]) -> Database:
    allow_two_weeks_ahead(database.owner_dsn)
    for event in generated_events(6, "sp"):
        assert ingest(service, event)[0] == "stored"
    with psycopg.connect(database.server.dsn_for("postgres", database.name), autocommit=True) as su:
        su.execute("GRANT CREATE ON SCHEMA public TO PUBLIC")  # as pg_upgrade leaves it
    for statement in SHADOWS:
        service.execute(statement)  # type: ignore[arg-type]
    return database


def shadow_calls(database: Database) -> list[str]:
    with psycopg.connect(database.server.dsn_for("postgres", database.name)) as su:
        return [r[0] for r in su.execute("SELECT name FROM public.shadow_calls ORDER BY name")]


def test_the_calls_cover_every_function_of_the_schema(owner: psycopg.Connection[Any]) -> None:
    names = {
        r[0].replace(", ", ",")
        for r in owner.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = 'metastore'::regnamespace"
        )
    }
    assert names == set(CALLS), "a function of the schema is not called by the search_path test"


@pytest.mark.parametrize("search_path", ['"$user", public', "public, pg_catalog"])
def test_owner_calls_never_run_shadow_code_from_public(planted: Database, search_path: str) -> None:
    event2 = dict(EVENT, run={"runId": "r-owner-2"})
    params = {
        "one": json.dumps("a"),
        "event": json.dumps(EVENT),
        "event2": json.dumps(event2),
        "bad": json.dumps({"eventTime": "yesterday", "job": {"namespace": "n", "name": "x"}}),
        "malformed": json.dumps(dict(EVENT, outputs=[{"namespace": "n", "name": 7}])),
        "body": json.dumps(dict(EVENT, run={"runId": "r-owner-3"})).encode(),
        "batch": json.dumps([dict(EVENT, run={"runId": "r-owner-4"}), {"not": "an event"}]).encode(),
    }
    with psycopg.connect(planted.owner_dsn, autocommit=True) as owner:
        owner.execute(f"SET search_path = {search_path}")  # type: ignore[arg-type]
        for name, statement in CALLS.items():
            if name in ("metastore.forbid_change()", "metastore.settings_keep_row()"):
                with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
                    owner.execute(statement)  # type: ignore[arg-type]
            elif not CITUS and name.startswith("metastore.read_sequenced_events("):
                # The feed's order on Citus: its table exists only there.
                with pytest.raises(psycopg.errors.UndefinedTable):
                    owner.execute(statement, params)  # type: ignore[arg-type]
            elif name == "metastore.malformed_datasets(jsonb,jsonb)":
                with pytest.raises(psycopg.errors.InvalidParameterValue):
                    owner.execute(statement, params)  # type: ignore[arg-type]
            else:
                owner.execute(statement, params)  # type: ignore[arg-type]
        assert owner.execute("SELECT pg_catalog.count(*) FROM metastore.datasets_view").fetchone() != (0,)

    assert shadow_calls(planted) == []
    with psycopg.connect(planted.service_dsn) as service:
        row = service.execute("SELECT has_table_privilege('metastore.events', 'TRUNCATE')").fetchone()
        assert row == (False,)

    # The shadows are live: the same owner session running unqualified code of its own calls them.
    with psycopg.connect(planted.owner_dsn, autocommit=True) as owner:
        owner.execute(f"SET search_path = {search_path}")  # type: ignore[arg-type]
        owner.execute("SELECT format('%s[%s]', 'inputs'::text, 1::bigint)")
    assert shadow_calls(planted) == ["format(text,text,bigint)"]
    with psycopg.connect(planted.service_dsn) as service:
        row = service.execute("SELECT has_table_privilege('metastore.events', 'TRUNCATE')").fetchone()
        assert row == (True,), "the planted code escalates when it runs as the owner"
