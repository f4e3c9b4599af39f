# Everything starts from a bare machine with python3 and go: `make test` and
# `make demo` create .venv, install the package (compiling nsq/_frame.pyx) and
# build nsqd/nsqlookupd into .nsq-bin when they are missing. `make test` also
# resolves Apache Pulsar's broker jars into .pulsar-lib (ci/install-pulsar.sh:
# needs Java 17 and Maven, which it installs with apt-get when root) for the
# tests that start a real Pulsar standalone broker.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
NSQD := .nsq-bin/nsqd
PULSAR_STAMP := $(or $(PULSAR_LIB_DIR),.pulsar-lib)/.pulsar-version

.PHONY: install nsq pulsar wheel wheels test-pythons lint docs test test-unit demo bench bench-pulsar pynsq-corpus fuzz soak reliability clean

$(STAMP): pyproject.toml setup.py requirements-dev.txt nsq/_frame.pyx nsq/_publish.pyx pulsarfast/wire/_codec.pyx msgengine/_sockio.pyx msgengine/_buffer.pxd Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet -e '.[spark]'
	$(PY) -c "import nsq.codec as c, nsq.publishing as p, pulsarfast.wire.codec as w, msgengine.sockio as s, sys; print('nsq codec:', c.IMPLEMENTATION, '- nsq publish path:', p.IMPLEMENTATION, '- pulsarfast wire:', w.IMPLEMENTATION, '- socket calls:', s.IMPLEMENTATION); sys.exit(c.IMPLEMENTATION != 'cython' or p.IMPLEMENTATION != 'cython' or w.IMPLEMENTATION != 'cython' or s.IMPLEMENTATION != 'cython')"
	touch $(STAMP)

install: $(STAMP)

$(NSQD):
	bash ci/install-nsq.sh

nsq: $(NSQD)

$(PULSAR_STAMP):
	bash ci/install-pulsar.sh

pulsar: $(PULSAR_STAMP)

# Manylinux wheels for every supported CPython found (3.10 to 3.13: ci/pythons.sh finds them as
# a CI runner would, PYTHONS overrides; a missing one is named, not skipped silently), each with
# both compiled codecs inside and repaired by auditwheel, and the sdist they were built from, in
# dist/. tests/packaging/test_packaging.py installs each wheel into a fresh venv of its Python
# without a compiler. `make wheel` is the same.
PYTHONS ?=
WHEEL_SOURCES := pyproject.toml setup.py README.md ci/pythons.sh $(wildcard nsq/*.py nsq/*/*.py nsq/*.pyx msgengine/*.py msgengine/*/*.py msgengine/*.pxd pulsarfast/*.py pulsarfast/*/*.py pulsarfast/*/*.pyx)
WHEELS_STAMP := dist/.wheels-stamp
$(WHEELS_STAMP): $(STAMP) $(WHEEL_SOURCES)
	PY=$(CURDIR)/$(PY) PYTHONS="$(PYTHONS)" bash ci/pythons.sh wheels
	touch $(WHEELS_STAMP)

wheels: $(WHEELS_STAMP)

wheel: wheels

# The server-less tests and the integration tests marked `pythons` (a round trip per backend per
# protocol, the tornado and asyncio loop programs, the official Pulsar client beside ours) on each
# Python's own wheel, installed into a fresh venv with binary packages only. CI runs it after `make test`.
test-pythons: wheels nsq pulsar
	PY=$(CURDIR)/$(PY) PYTHONS="$(PYTHONS)" TEST_WORKERS=$(TEST_WORKERS) bash ci/pythons.sh test

# mypy over msgengine, nsq and pulsarfast (settings in pyproject.toml's [tool.mypy]): 0 errors.
lint: install
	$(PY) -m mypy

# The documentation site (mkdocs.yml, docs/; requirements-docs.txt) into build/site, strict: a broken
# link or anchor, a page missing from the nav, a reference that does not resolve or any other warning
# fails. The API reference is generated from the docstrings (mkdocstrings); ci/check_docs_api.py then
# checks that every public name of the documented modules is on a page. CI runs it after `make lint`.
DOCS_STAMP := $(VENV)/.docs-stamp
$(DOCS_STAMP): $(STAMP) requirements-docs.txt
	$(PY) -m pip install --quiet -r requirements-docs.txt
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir build/site
	$(PY) ci/check_docs_api.py build/site/objects.inv

# The suite runs on TEST_WORKERS pytest-xdist workers (most tests wait on a server, so more workers
# than cores overlap well: see docs/development.md), each with its own nsqd/nsqlookupd; the run shares one
# Pulsar broker (tests/support/shared_broker.py), and the tests pinned to one worker (the Spark
# session, the modules with brokers of their own) carry an xdist_group mark (--dist loadgroup).
TEST_WORKERS ?= 6
PYTEST_PARALLEL = -n $(TEST_WORKERS) --dist loadgroup
test: install nsq pulsar wheels
	NSQ_REQUIRE_COMPILED=1 NSQ_REQUIRE_SPARK=1 NSQ_REQUIRE_WHEEL=1 $(PY) -m pytest -q $(PYTEST_PARALLEL)
	NSQ_PURE_PYTHON=1 $(PY) -m pytest -q $(PYTEST_PARALLEL) -m pure

# The server-less tests alone (no nsqd, broker or Spark: a test that starts one fails, telling to
# mark it `integration`), in well under a minute.
test-unit: install
	NSQFAST_TESTS_UNIT_ONLY=1 NSQ_REQUIRE_COMPILED=1 $(PY) -m pytest -q $(PYTEST_PARALLEL) -m "not integration"

demo: install nsq
	$(PY) examples/demo.py

# Side by side against pynsq, gnsq, go-nsq and nsq's bench_reader/bench_writer on
# real nsqd (peers go into .bench-venvs/): results in benchmarks/results/ and the
# site's benchmarks page (docs/benchmarks.md, benchmarks/update_docs.py), with nsq.spark's sink and source rates and pulsarfast beside
# the official Pulsar client (benchmarks/pulsar_quick.py, the same as `make bench-pulsar`).
# `make bench BENCH_ARGS=--quick SPARK_BENCH_ARGS="--sink-rows 100000 --source-messages 30000"`
# is a smoke run.
BENCH_ARGS ?=
SPARK_BENCH_ARGS ?=
PULSAR_SPARK_BENCH_ARGS ?=
bench: install nsq pulsar
	PYTHON=$(PYTHON) bash benchmarks/setup_peers.sh
	$(PY) benchmarks/run.py $(BENCH_ARGS)
	$(PY) benchmarks/bench_spark.py $(SPARK_BENCH_ARGS) > benchmarks/results/spark.json
	$(PY) benchmarks/bench_pulsar_spark.py $(PULSAR_SPARK_BENCH_ARGS) > benchmarks/results/pulsar_spark.json
	$(MAKE) --no-print-directory bench-pulsar
	$(PY) benchmarks/import_time.py
	$(PY) benchmarks/otel_cost.py $(OTEL_BENCH_ARGS)
	$(PY) benchmarks/update_docs.py

# pulsarfast beside the official pulsar-client (3.13) on one real Pulsar broker:
# produce (send_async + flush), consume (receive + acknowledge), blocking send and
# the gevent ticker, counts checked against the broker, the targets' ratios; results in
# benchmarks/results/pulsar_quick.json (make bench runs it too and puts it in docs/benchmarks.md);
# then where a batched consume's time goes (benchmarks/pulsar_dispatch.py: the broker's
# round trip per entry, and each client's receive + acknowledge from a full queue); then a
# JsonSchema topic and 1 MiB chunked messages (benchmarks/pulsar_features.py); then
# pulsarfast.asyncio beside the official pulsar.asyncio (benchmarks/pulsar_asyncio.py); then
# transactional produce beside plain batched produce, ours and the Java client's, on a broker with
# its coordinator on (benchmarks/pulsar_transactions.py). `make bench` also measures import time
# (benchmarks/import_time.py) and the OpenTelemetry instrumentation off and on (benchmarks/otel_cost.py).
# `make bench-pulsar PULSAR_BENCH_ARGS=--quick PULSAR_FEATURES_ARGS=--quick` is a smoke run.
PULSAR_BENCH_ARGS ?=
PULSAR_FEATURES_ARGS ?=
PULSAR_ASYNCIO_ARGS ?=
PULSAR_TXN_ARGS ?=
OTEL_BENCH_ARGS ?=
bench-pulsar: install pulsar
	$(PY) benchmarks/pulsar_quick.py $(PULSAR_BENCH_ARGS)
	$(PY) benchmarks/pulsar_dispatch.py --json benchmarks/results/pulsar_dispatch.json
	$(PY) benchmarks/pulsar_features.py $(PULSAR_FEATURES_ARGS)
	$(PY) benchmarks/pulsar_asyncio.py $(PULSAR_ASYNCIO_ARGS)
	$(PY) benchmarks/pulsar_transactions.py $(PULSAR_TXN_ARGS)

# The pynsq program corpus (tests/nsq/pynsq_programs/) on pynsq 0.9.1 + tornado, to
# show each program is a correct pynsq program; `make test` runs it on nsqfast.
pynsq-corpus: install nsq
	ONLY=pynsq PYTHON=$(PYTHON) bash benchmarks/setup_peers.sh
	PYNSQ_CORPUS_PYTHON=$(CURDIR)/.bench-venvs/pynsq/bin/python $(PY) -m pytest -q -p no:cacheprovider tests/nsq/test_pynsq_corpus.py --timeout 120

FUZZ_RUNS ?= 10000000
FUZZ_ATHERIS_RUNS ?= 2000000
FUZZ_ASAN_RUNS ?= 1000000
FUZZ_SEED ?= 0
FUZZ_PULSAR_RUNS ?= 1000000
FUZZ_PULSAR_ATHERIS_RUNS ?= 500000
FUZZ_PULSAR_ASAN_RUNS ?= 200000
SOAK_COUNT ?= 10000000
SOAK_FAULT_MESSAGES ?= 1000000
RELIABILITY := build/reliability

# The decoder under a mutation fuzzer (compiled and pure compared on every
# input), a coverage-guided atheris run when atheris installs, and an
# AddressSanitizer build of the compiled decoder; then pulsarfast's wire
# decoders (fuzz/fuzz_pulsar.py: compiled and pure twins compared) the same way.
fuzz: install
	-$(PY) -m pip install --quiet atheris
	$(PY) fuzz/fuzz_decoder.py --engine mutate --runs $(FUZZ_RUNS) --seed $(FUZZ_SEED) --json $(RELIABILITY)/fuzz-mutate.json
	if $(PY) -c "import atheris" 2>/dev/null; then \
	  $(PY) fuzz/fuzz_decoder.py --engine atheris --runs $(FUZZ_ATHERIS_RUNS) --seed $(FUZZ_SEED) --json $(RELIABILITY)/fuzz-atheris.json; \
	else echo "atheris not installable: coverage-guided run skipped"; fi
	$(PY) fuzz/fuzz_decoder.py --asan --runs $(FUZZ_ASAN_RUNS) --seed $(FUZZ_SEED) --json $(RELIABILITY)/fuzz-asan.json
	$(PY) fuzz/fuzz_pulsar.py --engine mutate --runs $(FUZZ_PULSAR_RUNS) --seed $(FUZZ_SEED) --json $(RELIABILITY)/fuzz-pulsar-mutate.json
	if $(PY) -c "import atheris" 2>/dev/null; then \
	  $(PY) fuzz/fuzz_pulsar.py --engine atheris --runs $(FUZZ_PULSAR_ATHERIS_RUNS) --seed $(FUZZ_SEED) --json $(RELIABILITY)/fuzz-pulsar-atheris.json; \
	else echo "atheris not installable: coverage-guided Pulsar run skipped"; fi
	$(PY) fuzz/fuzz_pulsar.py --asan --runs $(FUZZ_PULSAR_ASAN_RUNS) --seed $(FUZZ_SEED) --json $(RELIABILITY)/fuzz-pulsar-asan.json

# 10M messages published and consumed per backend (RSS, leftovers), and the
# server-fault tests at a million messages.
soak: install nsq
	$(PY) soak/soak.py --count $(SOAK_COUNT) --json $(RELIABILITY)/soak.json
	$(PY) soak/report.py faults --messages $(SOAK_FAULT_MESSAGES) --json $(RELIABILITY)/faults-soak.json

# Regenerates docs/reliability.md from the figures the runs above left in build/.
reliability: install nsq pulsar
	$(PY) soak/report.py faults --json $(RELIABILITY)/faults.json
	$(PY) soak/report.py faults --pulsar --json $(RELIABILITY)/pulsar-faults.json
	$(PY) soak/report.py write --dir $(RELIABILITY) --out docs/reliability.md

clean:
	rm -rf $(VENV) .bench-venvs build dist nsq/_frame.c nsq/_publish.c nsq/*.so pulsarfast/wire/_codec.c pulsarfast/*/*.so msgengine/_sockio.c msgengine/*.so *.egg-info
