from tests.support.service_fixtures import client, module_db, serve, server, tls_files  # noqa: F401
