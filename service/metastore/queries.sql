-- Every statement the service runs. Python loads them by name and passes parameters;
-- the logic lives in the metastore.* functions these call.

-- name: ingest_event
SELECT status, event_id, error_code, error_message, event_type
  FROM metastore.ingest_event(%(body)b::bytea, %(source_kind)s::text, %(source_principal)s::text);

-- name: ingest_events
SELECT status, event_id, error_code, error_message, event_type
  FROM metastore.ingest_events(%(bodies)b::bytea[], %(source_kind)s::text, %(source_principal)s::text);

-- name: ingest_batch
-- When no event is accepted, the answer carries the error object (on_failure) too: joined here,
-- so that Python passes the text through instead of parsing it to add a key.
SELECT status, (CASE WHEN status = 'failure' THEN result || %(on_failure)s::jsonb ELSE result END)::text AS result
  FROM metastore.ingest_batch(%(body)b::bytea, %(source_kind)s::text, %(source_principal)s::text);

-- name: list_datasets
SELECT metastore.list_datasets(%(limit)s::integer, %(cursor)s::text, %(namespace)s::text,
                               %(scheme)s::text, %(kind)s::text, %(q)s::text)::text;

-- name: get_dataset
SELECT metastore.get_dataset(%(id)s::bigint, %(events_limit)s::integer)::text;

-- name: dataset_lineage
SELECT metastore.lineage_graph(%(id)s::bigint, %(direction)s::text, %(depth)s::integer, %(limit)s::integer,
                               %(include)s::text)::text;

-- name: field_lineage
SELECT metastore.field_lineage(%(id)s::bigint, %(field)s::text, %(direction)s::text, %(depth)s::integer,
                               %(limit)s::integer)::text;

-- name: datasets_with_field
SELECT metastore.datasets_with_field(%(field)s::text, %(limit)s::integer)::text;
-- name: dataset_runs
SELECT metastore.dataset_runs(%(id)s::bigint, %(limit)s::integer)::text;

-- name: list_jobs
SELECT metastore.list_jobs(%(limit)s::integer, %(cursor)s::text, %(namespace)s::text, %(q)s::text, %(sort)s::text,
                           %(state)s::text, %(user)s::text)::text;

-- name: list_runs
SELECT metastore.list_runs(%(limit)s::integer, %(cursor)s::text, %(state)s::text, %(user)s::text, %(source)s::text,
                           %(job_namespace)s::text, %(dataset_id)s::bigint, %(from)s::text, %(to)s::text)::text;

-- name: search
SELECT metastore.search(%(q)s::text, %(limit)s::integer)::text;

-- name: list_namespaces
SELECT metastore.list_namespaces(%(limit)s::integer)::text;

-- name: get_job
SELECT metastore.get_job(%(id)s::bigint, %(runs_limit)s::integer)::text;

-- name: get_run
SELECT metastore.get_run(%(id)s::bigint)::text;

-- name: dataset_summary
SELECT metastore.dataset_summary()::text;

-- name: ensure_partitions
SELECT metastore.ensure_partitions();

-- name: schema_version
SELECT metastore.schema_version();

-- name: wal_insert_position
-- On the primary: where its WAL ends now (every transaction committed before this call ends before
-- it), as a replica's replay position would say it: the insert position right after a page header
-- (24 bytes; 40 at a segment's start) is the end of the record that filled the page before.
SELECT CASE WHEN mod(p, seg) = 40 THEN p - 40 WHEN mod(p, blk) = 24 THEN p - 24 ELSE p END AS position
  FROM (SELECT pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_insert_lsn(), '0/0') AS p,
               pg_catalog.current_setting('wal_block_size')::numeric AS blk,
               (SELECT setting::numeric FROM pg_catalog.pg_settings WHERE name = 'wal_segment_size') AS seg) AS w;

-- name: replica_replay_position
-- On the read replica: whether it is a standby, and how far it has replayed the primary's WAL.
SELECT pg_catalog.pg_is_in_recovery() AS standby,
       pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_last_wal_replay_lsn(), '0/0')::numeric AS position;

-- name: reject_event
SELECT metastore.reject_event(%(body)b::bytea, %(sqlstate)s::text, %(reason)s::text,
                              %(source_kind)s::text, %(source_principal)s::text);

-- name: write_probe
SELECT metastore.write_probe();
-- name: sequence_feed
-- On Citus, one pass of the feed's sequencer, in a transaction of its own before a page is read
-- (docs/events.md, "On Citus"); NULL on one server, where the feed needs none.
SELECT metastore.sequence_feed() AS moved;

-- name: read_events
-- Read in binary: each event arrives as the bytes it is sent as (as text it would be a Python str,
-- up to four bytes a character). An event longer than max_bytes comes without them, with its
-- length: the feed makes room for it and reads it again (service/metastore/feed.py).
SELECT CASE WHEN pg_catalog.octet_length(r.event) <= %(max_bytes)s::integer
            THEN pg_catalog.convert_to(r.event, 'UTF8') END AS event,
       pg_catalog.octet_length(r.event) AS bytes, r.cursor, r.more
  FROM metastore.read_events(%(limit)s::integer, %(cursor)s::text, %(event_time_from)s::text,
                             %(event_time_to)s::text, %(received_from)s::text, %(received_to)s::text,
                             %(job_namespace)s::text, %(job_name)s::text, %(dataset_namespace)s::text,
                             %(dataset_name)s::text, %(event_type)s::text) AS r;

-- name: forward_lag
SELECT (t ->> 'lag_seconds')::float8 AS lag_seconds
  FROM pg_catalog.jsonb_array_elements(metastore.forward_status() -> 'targets') AS t
 WHERE t ->> 'target' = %(target)s::text;

-- name: forward_claim
SELECT claimed, cursor FROM metastore.forward_claim(%(target)s::text, %(owner)s::text, %(lease_s)s::integer);

-- name: forward_page
-- The payloads' text as stored, as few as make max_bytes (at least one).
SELECT cursor, event_id, payload
  FROM metastore.forward_page(%(cursor)s::text, %(limit)s::integer, %(max_bytes)s::integer);

-- name: forward_refused
SELECT metastore.forward_refused(%(target)s::text, %(owner)s::text, %(event_id)s::bigint, %(cursor)s::text,
                                 %(status)s::integer, %(body)s::text);

-- name: forward_ack
SELECT metastore.forward_ack(%(target)s::text, %(owner)s::text, %(cursor)s::text, %(sent)s::integer,
                             %(refused)s::integer, %(error)s::text);

-- name: forward_status
SELECT metastore.forward_status()::text;

-- name: partitions_ahead
SELECT metastore.partitions_ahead();
