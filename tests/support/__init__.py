"""What tests, tests/e2e and bench share, so that no test module imports another: the service
started as a subprocess (servers), test certificates (certs), OpenLineage events (events), waiting
for what happens in its own time (eventually), and the helpers of several test modules (checks,
derived, generated, ingesting, partitions, lineage_graphs, ...). bench imports only modules without
pytest; the pytest fixtures of a service are in service_fixtures, imported by the conftest.py files."""
