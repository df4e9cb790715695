from tests.support.service_fixtures import client, module_db, server, tls_files  # noqa: F401
