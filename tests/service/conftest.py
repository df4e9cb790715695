from tests.support.service_fixtures import client, locked_events, module_db, module_serve, serve, server, tls_files  # noqa: F401
