"""What tests, tests/e2e and bench share: the service started as a subprocess (servers), test
certificates (certs) and OpenLineage events (events). No pytest here: bench imports it too."""
