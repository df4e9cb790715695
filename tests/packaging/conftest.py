from tests.server_fixtures import tls_files  # noqa: F401
