# syntax=docker/dockerfile:1
#
# The Metadata Store image: `metastore serve` by default, `metastore db deploy|revert|verify|status`
# for migrations (the Helm chart's hook Job runs the same image).
#
#   docker build -t metastore:0.1.0 .
#
# Runs as UID/GID 1000 and needs no writable root filesystem: what it writes goes to /tmp, the
# spool (METASTORE_SPOOL_DIR, e.g. /stackable/spool) and /stackable/log/metastore when
# METASTORE_LOG_FILE points there; mount them as emptyDir volumes (the chart does).

# python:3.11.16-slim-bookworm, pinned to the digest of its multi-platform image index as
# published for that tag on 2026-09-01. To move to a newer patch release, change tag and digest
# together (`docker buildx imagetools inspect python:3.11-slim-bookworm`).
FROM python:3.11.16-slim-bookworm@sha256:c425d915a89a6dcd3183b1797ad9bd8878caff5a417f6371c8df93c8ea8b727f AS base
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1


FROM base AS builder
# Every dependency installs from a wheel (psycopg's binary one brings its own libpq): no compiler.
WORKDIR /src
COPY pyproject.toml README.md ./
COPY service/ service/
COPY db/ db/

# The wheel carries the package, db/ (deploy, revert, verify, functions) and the static files;
# the runtime venv gets it and its dependencies, then loses pip (nothing installs at runtime).
RUN python -m pip wheel --no-deps --wheel-dir /wheels . \
 && python -m venv /stackable/app \
 && /stackable/app/bin/pip install --no-cache-dir /wheels/metastore-*.whl \
 && /stackable/app/bin/pip uninstall --yes pip \
 && /stackable/app/bin/metastore --help >/dev/null


FROM base AS runtime
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="metastore" \
      org.opencontainers.image.description="Metadata Store: OpenLineage events into PostgreSQL, datasets out" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"

RUN groupadd --gid 1000 stackable \
 && useradd --uid 1000 --gid 1000 --home-dir /stackable --no-create-home --shell /usr/sbin/nologin stackable \
 && mkdir -p /stackable/log/metastore /stackable/spool \
 && chown -R 1000:1000 /stackable/log /stackable/spool

# Owned by root and read-only for the service's user: the code cannot be changed at runtime,
# whether or not the root filesystem is mounted read-only. Bytecode was compiled at install.
COPY --from=builder /stackable/app /stackable/app

ENV PATH=/stackable/app/bin:$PATH \
    HOME=/stackable \
    TMPDIR=/tmp
WORKDIR /stackable
USER 1000:1000
EXPOSE 8443
ENTRYPOINT ["metastore"]
CMD ["serve"]
