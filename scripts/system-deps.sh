#!/usr/bin/env bash
# The system packages the tests and tools need, installed when missing (Debian; as root):
# PostgreSQL 15 (a TLS-capable server for the libpq TLS tests, and the second version CI runs),
# Chromium (the view's browser tests), nginx (the view's tests behind a reverse proxy under a
# path prefix, as Cockpit shows it: the tests run their own unprivileged instance), wrk and Go
# (benchmarks: bench/openloop), Maven (Trino for the end-to-end tests) and a JDK (Maven builds
# Trino's OpenLineage client for tests/trino_client). Elsewhere it only says what is missing.
set -euo pipefail

missing=()
[ -x /usr/lib/postgresql/15/bin/initdb ] || missing+=(postgresql-15)
[ -x /usr/bin/chromium ] || missing+=(chromium fonts-dejavu-core)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v wrk >/dev/null || missing+=(wrk)
command -v go >/dev/null || [ -x /usr/local/go/bin/go ] || missing+=(golang-go)
command -v mvn >/dev/null || missing+=(maven)
command -v javac >/dev/null || missing+=(openjdk-17-jdk-headless)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  echo "installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "missing system packages: ${missing[*]} (Debian names); install them, then run make again" >&2
  exit 1
fi
