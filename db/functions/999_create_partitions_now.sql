-- Runs last on every deploy, once the functions above exist: the daily partitions from
-- yesterday to 14 days ahead (UTC), so that a fresh deploy stores events in their days at once.
-- A no-op when they exist. The service calls it too, at start and every hour.
SELECT metastore.create_partitions();
