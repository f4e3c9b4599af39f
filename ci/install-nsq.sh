#!/usr/bin/env bash
# Builds pinned nsq binaries (nsqd, nsqlookupd, nsq_tail, to_nsq, bench_reader, bench_writer)
# from the Go module proxy into <repo>/.nsq-bin/; prints that folder's absolute path as the last stdout line.
set -euo pipefail

NSQ_VERSION="v1.3.0"
BINARIES=(nsqd nsqlookupd nsq_tail to_nsq bench_reader bench_writer)

log() { printf '[install-nsq] %s\n' "$*" >&2; }

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
BIN_DIR="${NSQ_BIN_DIR:-$REPO_ROOT/.nsq-bin}"
mkdir -p "$BIN_DIR"
BIN_DIR="$(cd "$BIN_DIR" && pwd)"

already_installed() {
    local name
    for name in "${BINARIES[@]}"; do
        [[ -x "$BIN_DIR/$name" ]] || return 1
    done
    local version
    version="$("$BIN_DIR/nsqd" --version 2>&1 || true)"
    [[ "$version" == *"${NSQ_VERSION#v}"* ]]
}

if already_installed; then
    log "nsq ${NSQ_VERSION} already present in $BIN_DIR"
    echo "$BIN_DIR"
    exit 0
fi

command -v go >/dev/null 2>&1 || { log "error: the Go toolchain ('go') is required"; exit 1; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/install-nsq.XXXXXX")"
cleanup() {
    chmod -R u+w "$WORK" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

start_ts=$(date +%s)
log "$(go version)"
log "downloading github.com/nsqio/nsq@${NSQ_VERSION} from the Go module proxy"

# `go install ...@version` refuses modules whose go.mod has a replace directive,
# so download the module source and build it in place instead.
mkdir -p "$WORK/probe"
(
    cd "$WORK/probe"
    go mod init install-nsq-probe >/dev/null 2>&1
    GOFLAGS=-mod=mod go mod download -json "github.com/nsqio/nsq@${NSQ_VERSION}"
) >"$WORK/download.json"

MOD_DIR="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' "$WORK/download.json" | head -n 1)"
if [[ -z "$MOD_DIR" || ! -f "$MOD_DIR/go.mod" ]]; then
    log "error: could not locate downloaded module; go mod download said:"
    cat "$WORK/download.json" >&2
    exit 1
fi

log "copying module source from $MOD_DIR"
cp -R "$MOD_DIR" "$WORK/src"
chmod -R u+w "$WORK/src"

pkgs=()
for name in "${BINARIES[@]}"; do
    if [[ -d "$WORK/src/apps/$name" ]]; then
        pkgs+=("./apps/$name")
    elif [[ -d "$WORK/src/bench/$name" ]]; then
        pkgs+=("./bench/$name")
    else
        log "error: no package directory for $name in nsq ${NSQ_VERSION}"
        exit 1
    fi
done

mkdir -p "$WORK/out"
log "building ${BINARIES[*]}"
(
    cd "$WORK/src"
    export GOFLAGS="-buildvcs=false"
    export CGO_ENABLED=0
    if ! go build -trimpath -o "$WORK/out/" "${pkgs[@]}" 1>&2; then
        log "build with the module's go.sum failed; retrying with -mod=mod"
        GOFLAGS="-buildvcs=false -mod=mod" go build -trimpath -o "$WORK/out/" "${pkgs[@]}" 1>&2
    fi
)

for name in "${BINARIES[@]}"; do
    [[ -x "$WORK/out/$name" ]] || { log "error: build produced no $name"; exit 1; }
    # copy next to the destination, then rename: never leaves a half-written binary
    cp "$WORK/out/$name" "$BIN_DIR/.$name.tmp.$$"
    mv -f "$BIN_DIR/.$name.tmp.$$" "$BIN_DIR/$name"
done

if ! already_installed; then
    log "error: installed nsqd does not report ${NSQ_VERSION}: $("$BIN_DIR/nsqd" --version 2>&1 || true)"
    exit 1
fi

log "installed nsq ${NSQ_VERSION} into $BIN_DIR in $(( $(date +%s) - start_ts ))s: $("$BIN_DIR/nsqd" --version 2>&1)"
echo "$BIN_DIR"
