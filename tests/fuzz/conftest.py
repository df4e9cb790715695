from tests.support.service_fixtures import client, module_db, module_serve, serve, server, tls_files  # noqa: F401
