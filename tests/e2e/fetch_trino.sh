#!/usr/bin/env bash
# Trino for the end-to-end tests, fetched from Maven Central with Maven's own client and
# unpacked once under ~/.cache/metastore-e2e/ (reused by every later run, offline).
# Prints the installation directory on stdout; progress and errors go to stderr.
#
#   io.trino:trino-server-core:476:tar.gz   launcher, lib/, a few plugins (no tpch, memory, openlineage)
#   io.trino:trino-tpch:476:zip             plugin/tpch
#   io.trino:trino-memory:476:zip           plugin/memory
#   io.trino:trino-openlineage:476:zip      plugin/openlineage; this zip is NOT on Maven Central (no
#                                           version of io.trino:trino-openlineage is), so the plugin is
#                                           taken from the full io.trino:trino-server:476:tar.gz instead.
set -euo pipefail

VERSION="${TRINO_VERSION:-476}"
CACHE="${METASTORE_E2E_CACHE:-$HOME/.cache/metastore-e2e}"
REPO="$CACHE/m2"
INSTALL="$CACHE/trino-server-$VERSION"
LOG="$CACHE/fetch-$VERSION.log"
DEPENDENCY_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

fail() {
  echo "fetch_trino: $*" >&2
  exit 1
}

if [ -f "$INSTALL/.complete" ]; then
  echo "$INSTALL"
  exit 0
fi

command -v mvn >/dev/null || fail "Maven (mvn) is not installed: it is needed to download Trino $VERSION from Maven Central (apt-get install maven)"
mkdir -p "$CACHE"
exec 9>"$CACHE/.fetch.lock"
flock 9  # another run may be fetching the same files
if [ -f "$INSTALL/.complete" ]; then
  echo "$INSTALL"
  exit 0
fi
: >"$LOG"

# Downloads io.trino:$1:$VERSION:$2 into the cache's own local repository (checksums enforced)
# and prints its path. Returns 2 when Maven Central does not have it, 1 on any other failure.
get() {
  local artifact="$1" type="$2"
  local file="$REPO/io/trino/$artifact/$VERSION/$artifact-$VERSION.$type"
  echo "fetch_trino: io.trino:$artifact:$VERSION:$type" >&2
  if ! mvn -B -ntp -C -Dstyle.color=never -Dmaven.repo.local="$REPO" "$DEPENDENCY_PLUGIN:get" \
       -Dartifact="io.trino:$artifact:$VERSION:$type" -Dtransitive=false >>"$LOG" 2>&1; then
    # Absent from Central, now or (cached by Maven) at an earlier attempt.
    if tail -n 40 "$LOG" | grep -Eq "Could not find artifact io.trino:$artifact|io.trino:$artifact:$type:$VERSION was not found"; then
      return 2
    fi
    return 1
  fi
  [ -s "$file" ] || return 1
  echo "$file"
}

download_failed() {
  local what="$1" status="$2"
  grep '^\[ERROR\] ..' "$LOG" | grep -Ev 'To see the full|Re-run Maven|For more information|\[Help 1\] http' | tail -n 3 >&2
  if [ "$status" -eq 2 ]; then
    fail "could not download $what: Maven Central does not have it"
  fi
  fail "could not download $what from Maven Central with mvn (no network, a proxy, or Maven settings?); full log: $LOG"
}

core=$(get trino-server-core tar.gz) || download_failed "io.trino:trino-server-core:$VERSION:tar.gz" $?
tpch=$(get trino-tpch zip) || download_failed "io.trino:trino-tpch:$VERSION:zip" $?
memory=$(get trino-memory zip) || download_failed "io.trino:trino-memory:$VERSION:zip" $?
status=0
openlineage=$(get trino-openlineage zip) || status=$?
full=""
if [ "$status" -eq 2 ]; then
  echo "fetch_trino: io.trino:trino-openlineage:$VERSION:zip is not on Maven Central; taking plugin/openlineage from the full server tarball (~820 MB)" >&2
  full=$(get trino-server tar.gz) || download_failed "io.trino:trino-server:$VERSION:tar.gz (for plugin/openlineage)" $?
elif [ "$status" -ne 0 ]; then
  download_failed "io.trino:trino-openlineage:$VERSION:zip" "$status"
fi

stage=$(mktemp -d "$CACHE/.stage-$VERSION.XXXXXX")
trap 'rm -rf "$stage"' EXIT
echo "fetch_trino: unpacking into $INSTALL" >&2
tar -xzf "$core" -C "$stage"
root="$stage/trino-server-core-$VERSION"
[ -x "$root/bin/launcher" ] || fail "$core has no trino-server-core-$VERSION/bin/launcher"

# A plugin zip holds one top-level folder trino-<name>-<version>/, installed as plugin/<name>/.
install_zip() {
  local zip="$1" name="$2"
  unzip -q "$zip" -d "$stage/$name.unzip"
  mv "$stage/$name.unzip/trino-$name-$VERSION" "$root/plugin/$name"
}
install_zip "$tpch" tpch
install_zip "$memory" memory
if [ -n "$full" ]; then
  # The full tarball stores files it holds twice as hard links to their first copy (in lib/ or
  # another plugin): extract those first copies too, then keep only plugin/openlineage.
  members="$stage/openlineage.members"
  echo "trino-server-$VERSION/plugin/openlineage" >"$members"
  tar -tvzf "$full" "trino-server-$VERSION/plugin/openlineage" | sed -n 's/^h.* link to //p' >>"$members"
  tar -xzf "$full" -C "$stage" --verbatim-files-from -T "$members"
  mv "$stage/trino-server-$VERSION/plugin/openlineage" "$root/plugin/openlineage"
else
  install_zip "$openlineage" openlineage
fi
for name in tpch memory openlineage; do
  ls "$root/plugin/$name/io.trino_trino-$name-$VERSION.jar" >/dev/null 2>&1 \
    || fail "plugin/$name of Trino $VERSION lacks io.trino_trino-$name-$VERSION.jar"
done

{
  echo "trino $VERSION from Maven Central"
  echo "$core"
  echo "$tpch"
  echo "$memory"
  echo "${full:-$openlineage}"
} >"$root/.complete"
rm -rf "$INSTALL"
mv "$root" "$INSTALL"
echo "$INSTALL"
