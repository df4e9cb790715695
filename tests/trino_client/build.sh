#!/usr/bin/env bash
# Builds the emit() timer (pom.xml + src/) into one jar, once: cached under
# ~/.cache/metastore-e2e/trino-client/<hash of pom.xml and sources>/, reused by every later run.
# Maven's local repository (~/.m2) keeps the dependencies: the first build downloads
# io.openlineage:openlineage-java:1.33.0 and Apache HttpClient 5 from Maven Central, later builds
# run offline. Prints the jar's path on stdout; progress and errors go to stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${METASTORE_E2E_CACHE:-$HOME/.cache/metastore-e2e}/trino-client"

fail() {
  echo "trino_client/build: $*" >&2
  exit 1
}

hash=$(cd "$HERE" && find pom.xml src -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
jar="$CACHE/$hash/trino-client-bench.jar"
if [ -s "$jar" ]; then
  echo "$jar"
  exit 0
fi

command -v mvn >/dev/null || fail "Maven (mvn) is not installed: it builds the OpenLineage client harness (apt-get install maven)"
mkdir -p "$CACHE"
exec 9>"$CACHE/.build.lock"
flock 9  # another run may be building the same jar
if [ -s "$jar" ]; then
  echo "$jar"
  exit 0
fi

work=$(mktemp -d "$CACHE/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -r "$HERE/pom.xml" "$HERE/src" "$work/"
log="$CACHE/build.log"
echo "trino_client/build: building the OpenLineage 1.33.0 client harness ($hash)" >&2
# Offline first (everything already in ~/.m2), else online once.
if ! (cd "$work" && mvn -B -q -o -ntp -Dstyle.color=never package >"$log" 2>&1); then
  (cd "$work" && mvn -B -q -ntp -Dstyle.color=never package >"$log" 2>&1) \
    || { tail -n 30 "$log" >&2; fail "mvn package failed; full log: $log"; }
fi
mkdir -p "$CACHE/$hash"
cp "$work/target/trino-client-bench.jar" "$jar.tmp"
mv "$jar.tmp" "$jar"
echo "$jar"
