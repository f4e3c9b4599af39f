# Everything starts from a bare machine with python3 and go: `make test` and
# `make demo` create .venv, install the package (compiling nsq/_frame.pyx) and
# build nsqd/nsqlookupd into .nsq-bin when they are missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
NSQD := .nsq-bin/nsqd

.PHONY: install nsq test test-pure demo bench fuzz soak clean

$(STAMP): pyproject.toml setup.py requirements-dev.txt nsq/_frame.pyx
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet -e '.[spark]'
	$(PY) -c "import nsq.codec as c, sys; print('nsq codec:', c.IMPLEMENTATION); sys.exit(c.IMPLEMENTATION != 'cython')"
	touch $(STAMP)

install: $(STAMP)

$(NSQD):
	bash ci/install-nsq.sh

nsq: $(NSQD)

test: install nsq
	NSQ_REQUIRE_COMPILED=1 NSQ_REQUIRE_SPARK=1 $(PY) -m pytest -q
	NSQ_PURE_PYTHON=1 $(PY) -m pytest -q -m pure

demo: install nsq
	$(PY) examples/demo.py

clean:
	rm -rf $(VENV) build nsq/_frame.c nsq/*.so *.egg-info
