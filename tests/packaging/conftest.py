from tests.support.service_fixtures import tls_files  # noqa: F401
