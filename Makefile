# The lab's two commands: `make report` and `make test`. Everything they need is set up here.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
LAB_HOME ?= .lab
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
BENCH_ARGS ?= --full

.PHONY: help venv setup git-filters node report test unit lint chromium redis bench lab stop wipe proto clean

help:  ## this list
	@grep -hE '^[a-z]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z]+):.*## (.*)/  make \1\t\2/' | expand -t 16

# native/: the compiled decode of the common history row and the driver's UUID constructor (lab_native,
# Rust + PyO3), built by pip with maturin (from PyPI) and cargo (crates from crates.io, pinned by
# native/Cargo.lock); without it the reads take the Python path. Rebuilt when its sources change.
NATIVE_SRC := native/pyproject.toml native/Cargo.toml native/Cargo.lock $(wildcard native/src/*.rs)

$(STAMP): pyproject.toml $(NATIVE_SRC)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -U pip
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q ./native
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	$(BIN)/python -c "from lab.calibration.notebooks import ensure_kernel; ensure_kernel()"
	touch $(STAMP)

venv: $(STAMP)  ## the venv with the package and its dev tools

setup: $(STAMP) git-filters  ## venv + packages + Cassandra and Kafka jars + the notebooks' git filter
	$(BIN)/lab node jars --home $(LAB_HOME)

# Notebooks are committed without outputs: nbstripout as this clone's git clean filter (the
# attribute is in .gitattributes; the filter command lives in .git/config, so each clone installs
# it). Running cells or JupyterLab's autosave then changes nothing git sees; a no-op outside git.
# Then the index's stat cache is refreshed (notebooks compared as stored, no filter): in a fresh
# clone every file is as new as the index, so each `git status` of a run's environment (which
# must not write the index) put every notebook through nbstripout: 10 s, its timeout, per run.
git-filters:  ## nbstripout as the git filter of notebooks/*.ipynb (outputs never committed)
	@if git rev-parse --git-dir >/dev/null 2>&1; then $(BIN)/nbstripout --install && echo "nbstripout: installed as this clone's git filter" && { git -c filter.nbstripout.clean=cat update-index -q --refresh >/dev/null || true; }; fi

node: setup redis  ## start (or reuse) the embedded node, Kafka broker and Redis
	$(BIN)/lab node start --home $(LAB_HOME) $(NODE_FLAGS)

report: node  ## headless calibration on the embedded node; prints the report's path
	$(BIN)/lab calibrate --quick --home $(LAB_HOME)

# The suite makes and drops hundreds of keyspaces: a node it starts is a throwaway one (schema
# changes stay in the commit log, not flushed at once; no fsync; docs/embedded-node.md). A node
# already running is reused as it was started.
test: NODE_FLAGS = --throwaway
# The emulated round trip's proxy (toxiproxy, built with Go on first use: ~50 s on empty caches)
# builds in the background while the suite runs; the tests that need it wait on its lock.
test: node chromium  ## the whole test suite against the real node
	mkdir -p build && ($(BIN)/python -c "from lab.cluster.rtt_proxy import toxiproxy_binary; toxiproxy_binary()" \
		> build/toxiproxy-build.log 2>&1 &)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

unit: $(STAMP)  ## tests/unit only: no node, no JDK (seconds)
	LAB_UNIT_IN_PROCESS=1 $(BIN)/python -m pytest tests/unit -m "not spawns" $(PYTEST_ARGS)

lint: $(STAMP)  ## ruff over every Python file in the repo
	$(BIN)/ruff check .

# Headless Chromium renders report.html in tests/test_calibrate.py. Debian's package, installed
# once (we run as root on the lab machines); a no-op when /usr/bin/chromium exists.
chromium:  ## Debian's Chromium (renders report.html in a test); a no-op when present
	@test -x /usr/bin/chromium || { \
	  apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; }

# Redis for archiver mode's hot window: Debian's redis-server, installed like Chromium; the lab
# starts its own on 127.0.0.1:16379 (lab.cluster.embedded.redis_server), never the package's service.
redis:  ## Debian's redis-server (the hot window); a no-op when present
	@command -v redis-server >/dev/null || { \
	  apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server; }

bench: node  ## store benchmark (full write path vs bare LWT, history vs bare SELECT, grouped vs naive); BENCH_ARGS=--quick for < 1 min
	$(BIN)/lab bench store $(BENCH_ARGS) --home $(LAB_HOME)

lab: node git-filters  ## JupyterLab on notebooks/ with the project's kernel
	$(BIN)/lab jupyter --home $(LAB_HOME)

stop:  ## stop every node, broker and Redis the lab started (by recorded PID)
	-$(BIN)/lab node stop --home $(LAB_HOME) --all

wipe: stop  ## delete the node data folders
	-$(BIN)/lab node wipe --home $(LAB_HOME)

proto: $(STAMP)  ## regenerate lab/store/rows/proto/common_pb2.py
	$(BIN)/python -m lab.store.rows.proto.generate

clean: stop  ## remove the venv and the lab home
	rm -rf $(VENV) $(LAB_HOME)
