from tests.server_fixtures import client, module_db, server, tls_files  # noqa: F401
