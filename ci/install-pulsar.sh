#!/usr/bin/env bash
# Resolves Apache Pulsar's broker (a pinned version) and every jar it needs at run time from
# Maven Central into <repo>/.pulsar-lib/ (override with PULSAR_LIB_DIR), for tests that start
# a real standalone broker on loopback. Prints that folder's absolute path as the last stdout
# line. A no-op when the jars of this version are already there.
set -euo pipefail

PULSAR_VERSION="4.0.7"

log() { printf '[install-pulsar] %s\n' "$*" >&2; }

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
LIB_DIR="${PULSAR_LIB_DIR:-$REPO_ROOT/.pulsar-lib}"
mkdir -p "$LIB_DIR"
LIB_DIR="$(cd "$LIB_DIR" && pwd)"
STAMP="$LIB_DIR/.pulsar-version"

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$PULSAR_VERSION" ]] && ls "$LIB_DIR"/pulsar-broker-"$PULSAR_VERSION".jar >/dev/null 2>&1; then
    log "pulsar-broker ${PULSAR_VERSION} already present in $LIB_DIR"
    echo "$LIB_DIR"
    exit 0
fi

if ! command -v mvn >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [[ "$(id -u)" == 0 ]]; then
        # Debian's maven depends on default-jre-headless: this brings a Java runtime too if missing
        log "installing maven from Debian's packages"
        apt-get update -qq >&2 && apt-get install -y -qq maven >&2
    else
        log "error: maven ('mvn') is required (Debian: apt-get install maven)"
        exit 1
    fi
fi
command -v java >/dev/null 2>&1 || { log "error: a Java runtime (17) is required"; exit 1; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/install-pulsar.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
cat >"$WORK/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>nsqfast.ci</groupId>
  <artifactId>pulsar-broker-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.pulsar</groupId>
      <artifactId>pulsar-broker</artifactId>
      <version>${PULSAR_VERSION}</version>
    </dependency>
  </dependencies>
</project>
EOF

log "resolving pulsar-broker ${PULSAR_VERSION} from Maven Central (about 250 MB the first time)"
rm -f "$LIB_DIR"/*.jar "$STAMP"
(cd "$WORK" && mvn -B -q dependency:copy-dependencies -DoutputDirectory="$LIB_DIR" -DincludeScope=runtime) >&2
ls "$LIB_DIR"/pulsar-broker-"$PULSAR_VERSION".jar >/dev/null
printf '%s' "$PULSAR_VERSION" >"$STAMP"
log "pulsar-broker ${PULSAR_VERSION}: $(ls "$LIB_DIR"/*.jar | wc -l) jars in $LIB_DIR"
echo "$LIB_DIR"
