#!/usr/bin/env bash
# Every supported CPython (3.10 to 3.13): finds the interpreters, builds one manylinux wheel per
# Python from the sdist, and runs the tests on each Python against its own wheel.
#
#   ci/pythons.sh find     one "VERSION INTERPRETER" line per Python found (stdout); a missing one
#                          is named on stderr, never skipped silently
#   ci/pythons.sh wheels   dist/: the sdist, and a wheel per Python found built from it (both
#                          compiled codecs inside, repaired by auditwheel)          (`make wheels`)
#   ci/pythons.sh test     per Python: a fresh venv, its wheel installed with binary packages only,
#                          then the server-less tests and the integration tests marked `pythons`,
#                          run from a copy of the checkout without the packages' sources, so that
#                          what is tested is the installed wheel                  (`make test-pythons`)
#
# PYTHON_VERSIONS: what is looked for (default "3.10 3.11 3.12 3.13"). PYTHONS: the interpreters
# to use instead of looking (paths or names, space separated), as a CI runner sets it; by default
# each version is looked for as $PYENV_ROOT/versions/X.Y.*/bin/pythonX.Y (the newest), then as
# pythonX.Y on PATH. PY: the project's venv Python, whose `build` and `auditwheel` are used.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
PYTHON_VERSIONS="${PYTHON_VERSIONS:-3.10 3.11 3.12 3.13}"
PYENV_ROOT="${PYENV_ROOT:-$HOME/.pyenv}"
PY="${PY:-$REPO/.venv/bin/python}"
WORK="$REPO/build/pythons"
TEST_WORKERS="${TEST_WORKERS:-4}"

say() { printf '[pythons] %s\n' "$*" >&2; }

version_of() {  # the X.Y of an interpreter, or nothing when it does not run
    "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true
}

find_pythons() {
    local version candidate found
    if [[ -n "${PYTHONS:-}" ]]; then
        for candidate in $PYTHONS; do
            found="$(command -v "$candidate" || true)"
            version=""
            [[ -z "$found" ]] || version="$(version_of "$found")"
            if [[ -z "$version" ]]; then
                say "SKIPPED $candidate (from PYTHONS): not an interpreter that runs"
            else
                echo "$version $found"
            fi
        done
        return
    fi
    for version in $PYTHON_VERSIONS; do
        found=""
        for candidate in $(ls -d "$PYENV_ROOT"/versions/"$version".*/bin/python"$version" 2>/dev/null | sort -V); do
            [[ "$(version_of "$candidate")" == "$version" ]] && found="$candidate"
        done
        if [[ -z "$found" ]]; then
            candidate="$(command -v "python$version" || true)"
            [[ -n "$candidate" && "$(version_of "$candidate")" == "$version" ]] && found="$candidate"
        fi
        if [[ -z "$found" ]]; then
            say "SKIPPED Python $version: no $PYENV_ROOT/versions/$version.*/bin/python$version and no python$version on PATH (set PYTHONS to name it)"
        else
            echo "$version $found"
        fi
    done
}

tag_of() { echo "cp${1/./}"; }  # 3.12 -> cp312

build_wheels() {
    local pythons sdist version python venv tag
    pythons="$(find_pythons)"
    [[ -n "$pythons" ]] || { say "no Python to build for"; exit 1; }
    rm -rf dist build/wheel
    mkdir -p dist build/wheel "$WORK"
    "$PY" -m build --sdist --outdir build/wheel . >/dev/null
    sdist="$(ls build/wheel/nsqfast-*.tar.gz)"
    cp "$sdist" dist/
    # one isolated build per Python at once (each compiles on one core), then the repairs
    local jobs=() tags=()
    while read -r version python; do
        venv="$WORK/$version/build-venv"
        tag="$(tag_of "$version")"
        [[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
        say "building the $tag wheel from $(basename "$sdist") with $python"
        # pip's isolated build: setuptools and Cython of the build-system table, for this Python
        "$venv/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-deps \
            --wheel-dir "build/wheel/$tag" "$sdist" >"build/wheel/$tag.log" 2>&1 &
        jobs+=("$!")
        tags+=("$tag")
    done <<<"$pythons"
    local i
    for i in "${!jobs[@]}"; do
        tag="${tags[$i]}"
        if ! wait "${jobs[$i]}"; then
            cat "build/wheel/$tag.log" >&2
            say "the $tag wheel did not build"
            exit 1
        fi
        PATH="$(dirname "$PY"):$PATH" "$(dirname "$PY")/auditwheel" repair --wheel-dir dist \
            "build/wheel/$tag"/nsqfast-*-"$tag"-"$tag"-linux_x86_64.whl >"build/wheel/$tag.log" 2>&1 \
            || { cat "build/wheel/$tag.log" >&2; say "auditwheel could not repair the $tag wheel"; exit 1; }
    done
    echo "built:"
    ls -1 dist
}

copy_checkout_without_sources() {  # $1: where; the tests, their programs, docs and examples
    rm -rf "$1"
    mkdir -p "$1"
    git -C "$REPO" ls-files -z | grep -zvE '^(nsq|pulsarfast|msgengine)/' | xargs -0 cp --parents -t "$1"
}

test_pythons() {
    local pythons version python venv tag wheel tree failed=() passed=()
    pythons="$(find_pythons)"
    [[ -n "$pythons" ]] || { say "no Python to test"; exit 1; }
    tree="$WORK/checkout"
    copy_checkout_without_sources "$tree"
    while read -r version python; do
        tag="$(tag_of "$version")"
        wheel="$(ls dist/nsqfast-*-"$tag"-"$tag"-manylinux*.whl 2>/dev/null | tail -1 || true)"
        if [[ -z "$wheel" ]]; then
            say "Python $version: no $tag wheel in dist/ (run \`make wheels\`)"
            failed+=("$version (no wheel)")
            continue
        fi
        venv="$WORK/$version/test-venv"
        rm -rf "$venv"
        "$python" -m venv "$venv"
        say "Python $version: installing $(basename "$wheel") and the test tools, binary packages only"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary :all: \
            "$REPO/$wheel[test,metrics,avro,protobuf,encryption]" tornado 'pulsar-client>=3.5,<4'
        say "Python $version: the server-less tests and the \`pythons\` integration subset"
        if (cd "$tree" && NSQ_BIN_DIR="$REPO/.nsq-bin" PULSAR_LIB_DIR="${PULSAR_LIB_DIR:-$REPO/.pulsar-lib}" \
                NSQ_REQUIRE_COMPILED=1 NSQFAST_TESTS_FROM_WHEEL="$venv" \
                "$venv/bin/python" -m pytest -q -p no:cacheprovider -n "$TEST_WORKERS" --dist loadgroup \
                -m "not integration or pythons"); then
            passed+=("$version")
        else
            failed+=("$version")
        fi
    done <<<"$pythons"
    say "passed on: ${passed[*]:-none}"
    if ((${#failed[@]})); then
        say "FAILED on: ${failed[*]}"
        exit 1
    fi
}

case "${1:-}" in
    find) find_pythons ;;
    wheels) build_wheels ;;
    test) test_pythons ;;
    *) echo "usage: $0 find|wheels|test" >&2; exit 2 ;;
esac
