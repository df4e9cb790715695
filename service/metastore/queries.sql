-- Every statement the service runs. Python loads them by name and passes parameters;
-- the logic lives in the metastore.* functions these call.

-- name: ingest_event
SELECT status, event_id, error_code, error_message, event_type
  FROM metastore.ingest_event(%(body)b::bytea, %(source_kind)s::text, %(source_principal)s::text);

-- name: ingest_events
SELECT status, event_id, error_code, error_message, event_type
  FROM metastore.ingest_events(%(bodies)b::bytea[], %(source_kind)s::text, %(source_principal)s::text);

-- name: ingest_batch
SELECT status, result::text
  FROM metastore.ingest_batch(%(body)b::bytea, %(source_kind)s::text, %(source_principal)s::text);

-- name: list_datasets
SELECT metastore.list_datasets(%(limit)s::integer, %(cursor)s::text, %(namespace)s::text,
                               %(scheme)s::text, %(kind)s::text, %(q)s::text)::text;

-- name: get_dataset
SELECT metastore.get_dataset(%(id)s::bigint, %(events_limit)s::integer)::text;

-- name: dataset_summary
SELECT metastore.dataset_summary()::text;

-- name: create_partitions
SELECT metastore.create_partitions();

-- name: schema_version
SELECT metastore.schema_version();

-- name: reject_event
SELECT metastore.reject_event(%(body)b::bytea, %(sqlstate)s::text, %(reason)s::text,
                              %(source_kind)s::text, %(source_principal)s::text);

-- name: write_probe
SELECT metastore.write_probe();
