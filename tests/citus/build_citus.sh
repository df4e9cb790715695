#!/usr/bin/env bash
# Citus for the tests on the real engine (make test-citus), built once from the vendored source
# against Debian's PostgreSQL 15 and cached under ~/.cache/metastore-citus/<key>/ (reused by every
# later run, offline). No package registry serves Citus for PostgreSQL 15, so the source tarball
# comes from outside the repository (METASTORE_CITUS_TARBALL, by default ../shared/vendor/ next to
# the clone) and is checked against its pinned sha256.
#
# The cached tree is a private copy of the PostgreSQL 15 installation (usr/lib/postgresql/15 and
# usr/share/postgresql/15, which the server finds relative to its own binary) with Citus added:
# the system's PostgreSQL directories are never written. Prints the tree's bin directory on
# stdout (a copy under the temporary directory when the cache is in a folder the unprivileged
# server user cannot enter, e.g. root's home); progress and errors go to stderr.
#
# As root it installs the build's Debian packages when missing (the recipe of the vendor README):
# postgresql-server-dev-15 at the installed server's version, curl, lz4, zstd and krb5 headers.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
TARBALL="${METASTORE_CITUS_TARBALL:-$HERE/../../../shared/vendor/citus-13.2.2.tar.gz}"
SHA256="dd2453caec20a830e5e63f1def5c5a98cb6f57ae510407cdcd800916fcdab430"
PG_BIN="${METASTORE_CITUS_PG_BIN:-/usr/lib/postgresql/15/bin}"
CACHE="${METASTORE_CITUS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/metastore-citus}"
RECIPE=1  # bump when the way the tree is built changes

fail() {
  echo "build_citus: $*" >&2
  exit 1
}

[ -f "$TARBALL" ] || fail "no Citus source at $TARBALL (set METASTORE_CITUS_TARBALL to citus-13.2.2.tar.gz)"
[ -x "$PG_BIN/postgres" ] || fail "no PostgreSQL 15 server in $PG_BIN (make system-deps installs it)"
actual=$(sha256sum "$TARBALL" | cut -d' ' -f1)
[ "$actual" = "$SHA256" ] || fail "$TARBALL has sha256 $actual, not the pinned $SHA256"
pg_version=$("$PG_BIN/postgres" --version)
key=$(printf '%s\n%s\n%s\n' "$SHA256" "$pg_version" "$RECIPE" | sha256sum | cut -c1-16)
TREE="$CACHE/$key"
BIN="$TREE/usr/lib/postgresql/15/bin"

# The unprivileged user a root's test server runs as must reach the binaries.
reachable() {
  local p="$1"
  while [ "$p" != "/" ]; do
    [ $(( 8#$(stat -c '%a' "$p") & 1 )) -eq 1 ] || return 1
    p=$(dirname "$p")
  done
}

hand_out() {
  if [ "$(id -u)" -ne 0 ] || reachable "$TREE"; then
    echo "$BIN"
    return
  fi
  local copy="${TMPDIR:-/tmp}/metastore-citus-$key"
  if [ ! -f "$copy/.complete" ]; then
    local staging
    staging=$(mktemp -d "${TMPDIR:-/tmp}/metastore-citus-stage.XXXXXX")
    cp -a "$TREE/." "$staging/"
    chmod 755 "$staging"
    rm -rf "$copy"
    mv "$staging" "$copy" || true  # a concurrent run made it first
  fi
  echo "$copy/usr/lib/postgresql/15/bin"
}

if [ -f "$TREE/.complete" ]; then
  hand_out
  exit 0
fi

install_build_deps() {
  local missing=() server_version
  [ -f /usr/include/postgresql/15/server/postgres.h ] || missing+=(postgresql-server-dev-15)
  [ -f /usr/include/x86_64-linux-gnu/curl/curl.h ] || [ -f /usr/include/curl/curl.h ] || missing+=(libcurl4-openssl-dev)
  [ -f /usr/include/lz4.h ] || missing+=(liblz4-dev)
  [ -f /usr/include/zstd.h ] || missing+=(libzstd-dev)
  [ -f /usr/include/gssapi/gssapi.h ] || missing+=(libkrb5-dev)
  [ ${#missing[@]} -eq 0 ] && return
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    fail "missing build packages: ${missing[*]} (Debian names); install them, then run again"
  fi
  # The headers of the server that runs the tests, not of a newer minor release.
  server_version=$(dpkg-query -W -f='${Version}' postgresql-15 2>/dev/null || true)
  local pinned=()
  for p in "${missing[@]}"; do
    if [ "$p" = postgresql-server-dev-15 ] && [ -n "$server_version" ]; then
      pinned+=("$p=$server_version")
    else
      pinned+=("$p")
    fi
  done
  echo "build_citus: installing ${pinned[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${pinned[@]}" >/dev/null
}

mkdir -p "$CACHE"
exec 9>"$CACHE/.build.lock"
flock 9  # another run may be building the same tree
if [ -f "$TREE/.complete" ]; then
  hand_out
  exit 0
fi
install_build_deps

started=$(date +%s)
stage=$(mktemp -d "$CACHE/.stage-$key.XXXXXX")
trap 'rm -rf "$stage"' EXIT
log="$CACHE/build-$key.log"
echo "build_citus: building Citus 13.2.2 against $pg_version (a few minutes; log: $log)" >&2
mkdir "$stage/src"
tar -xzf "$TARBALL" -C "$stage/src" --strip-components=1
(
  cd "$stage/src"
  ./configure PG_CONFIG="$PG_BIN/pg_config"
  # with_llvm=no: the LLVM bitcode only serves JIT inlining and doubles the build.
  make -j"$(nproc)" with_llvm=no
  make install with_llvm=no DESTDIR="$stage/citus"
) >"$log" 2>&1 || fail "the build failed; the end of $log:$(echo; tail -n 20 "$log")"

# The PostgreSQL installation, copied, then Citus's files over it.
tree="$stage/tree"
mkdir -p "$tree/usr/lib/postgresql" "$tree/usr/share/postgresql"
cp -a "$PG_BIN/.." "$tree/usr/lib/postgresql/15"
share=$("$PG_BIN/pg_config" --sharedir)
cp -a "$share" "$tree/usr/share/postgresql/15"
rm -rf "$tree/usr/share/postgresql/15/man"
cp -a "$stage/citus/usr/lib/postgresql/15/lib/." "$tree/usr/lib/postgresql/15/lib/"
cp -a "$stage/citus$share/extension/." "$tree/usr/share/postgresql/15/extension/"
[ -f "$tree/usr/lib/postgresql/15/lib/citus.so" ] || fail "the build installed no citus.so"
relocated=$("$tree/usr/lib/postgresql/15/bin/pg_config" --pkglibdir)
[ "$relocated" = "$tree/usr/lib/postgresql/15/lib" ] || fail "the copied server would load extensions from $relocated"
chmod 755 "$tree"
printf 'citus 13.2.2 (%s) on %s, built in %s s\n' "$SHA256" "$pg_version" "$(( $(date +%s) - started ))" >"$tree/.complete"
rm -rf "$TREE"
mv "$tree" "$TREE"
echo "build_citus: $(cat "$TREE/.complete")" >&2
hand_out
