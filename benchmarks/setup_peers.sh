#!/usr/bin/env bash
# Sets up what `make bench` compares nsqfast with, under .bench-venvs/ (git-ignored):
#   .bench-venvs/pynsq   pynsq 0.9.1 + tornado (+ python-snappy), `import nsq` is pynsq
#   .bench-venvs/gnsq    gnsq 1.0.2 + gevent (+ python-snappy)
#   .bench-venvs/tools   matplotlib, for the chart
#   .bench-venvs/bin/gonsq-bench   benchmarks/gonsq built with go-nsq from the Go module proxy
# Idempotent: each part is skipped when its stamp matches. A part that fails is
# written to .bench-venvs/<name>.unavailable with the reason, and the others go
# on: benchmarks/run.py then reports that client as unavailable.
set -uo pipefail

PYTHON="${PYTHON:-python3}"
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
VENVS="$ROOT/.bench-venvs"
mkdir -p "$VENVS/bin"

log() { printf '[setup-peers] %s\n' "$*" >&2; }

# ONLY="pynsq gnsq" sets up just those peers (all of them when empty).
ONLY="${ONLY:-}"
wants() { [[ -z "$ONLY" || " $ONLY " == *" $1 "* ]]; }

# name, then pip requirement specs
python_venv() {
    local name="$1"; shift
    local dir="$VENVS/$name" stamp="$VENVS/$name/.bench-stamp" want="$*"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$dir/bin/python" ]]; then
        log "$name: up to date ($want)"
        rm -f "$VENVS/$name.unavailable"
        return 0
    fi
    log "$name: creating $dir with: $want"
    rm -rf "$dir"
    local out
    if out=$("$PYTHON" -m venv "$dir" 2>&1 && "$dir/bin/python" -m pip install --quiet --disable-pip-version-check "$@" 2>&1); then
        printf '%s' "$want" >"$stamp"
        rm -f "$VENVS/$name.unavailable"
        log "$name: ready"
    else
        printf 'pip install %s failed: %s\n' "$want" "$(printf '%s' "$out" | tail -n 15)" >"$VENVS/$name.unavailable"
        log "$name: UNAVAILABLE (see $VENVS/$name.unavailable)"
    fi
}

# pynsq 0.9.1 is tornado-based and takes any tornado; this one is checked on Python 3.11.
wants pynsq && python_venv pynsq "pynsq==0.9.1" "tornado==6.4.2" "python-snappy==0.7.3"
wants gnsq && python_venv gnsq "gnsq==1.0.2" "gevent>=23.9" "python-snappy==0.7.3"
wants tools && python_venv tools "matplotlib>=3.7,<4"
wants gonsq || exit 0

# go-nsq program
GO_SRC="$SCRIPT_DIR/gonsq"
GO_BIN="$VENVS/bin/gonsq-bench"
if ! command -v go >/dev/null 2>&1; then
    echo "the Go toolchain ('go') is not installed" >"$VENVS/gonsq.unavailable"
    log "gonsq: UNAVAILABLE (no go)"
elif [[ -x "$GO_BIN" && "$GO_BIN" -nt "$GO_SRC/main.go" && "$GO_BIN" -nt "$GO_SRC/go.mod" && "$GO_BIN" -nt "$GO_SRC/go.sum" ]]; then
    log "gonsq: up to date"
    rm -f "$VENVS/gonsq.unavailable"
else
    log "gonsq: building $GO_BIN"
    if out=$( (cd "$GO_SRC" && GOFLAGS="-buildvcs=false -mod=readonly" go build -trimpath -o "$GO_BIN.tmp" .) 2>&1 ); then
        mv -f "$GO_BIN.tmp" "$GO_BIN"
        rm -f "$VENVS/gonsq.unavailable"
        log "gonsq: ready"
    else
        rm -f "$GO_BIN.tmp"
        printf 'go build failed: %s\n' "$(printf '%s' "$out" | tail -n 15)" >"$VENVS/gonsq.unavailable"
        log "gonsq: UNAVAILABLE (see $VENVS/gonsq.unavailable)"
    fi
fi
exit 0
