# The two commands: `make run` and `make test`. Each creates .venv when missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# `make run` installs the runtime only; `make test` (and the other targets) the dev extra too.
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
STAMP  := $(DEV_STAMP)
ROOT   ?= .
HOST   ?= 127.0.0.1
PORT   ?= 8080
# `make run` prints one line, the URL; the server's own log shows warnings and errors only.
FEDSEARCH_LOG_LEVEL ?= warning
# pip's output goes to the log, which is shown only when pip fails.
LOG    := $(VENV)/install.log
QUIETLY = >$(LOG) 2>&1 || { cat $(LOG) >&2; echo "make: the install failed (its log: $(LOG))" >&2; exit 1; }

.PHONY: run test lint typecheck pytest fuzz chaos bench soak clean

$(BIN)/python:
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --upgrade pip $(QUIETLY)

# editable_mode=compat: a plain path entry in a .pth, where the default (a flat layout's import
# finder, with pathlib and importlib.util) costs every start of the interpreter ~20 ms, half of
# `python -c pass` here (bench/README.md, issue 21): a one-shot `fedsearch search` pays it each time.
$(RUN_STAMP): pyproject.toml | $(BIN)/python
	@$(BIN)/python -m pip install -e . --config-settings editable_mode=compat $(QUIETLY)
	@touch $(RUN_STAMP)

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	@$(BIN)/python -m pip install -e '.[dev]' --config-settings editable_mode=compat $(QUIETLY)
	@touch $(DEV_STAMP) $(RUN_STAMP)

run: $(RUN_STAMP)
	@exec env FEDSEARCH_LOG_LEVEL=$(FEDSEARCH_LOG_LEVEL) $(BIN)/fedsearch serve --root $(ROOT) --host $(HOST) --port $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check gateway adapters tests bench
	$(BIN)/ruff format --check gateway adapters tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/coverage run -m pytest
	$(BIN)/coverage report --precision=1 | grep -E "^TOTAL"

test: lint typecheck pytest

# The long fuzz run: ten times the in-suite budgets (about 10,000 cases of tests/test_fuzz.py, 250
# schemathesis examples per operation under a random seed, 2,000 raw request heads); prints the counts and the seed.
fuzz: $(STAMP)
	FEDSEARCH_FUZZ_SCALE=10 FEDSEARCH_FUZZ_SEED=random $(BIN)/pytest tests/test_fuzz.py tests/test_openapi_fuzz.py \
		tests/test_http_edges.py -p no:cacheprovider --timeout=3600

# The long crash run (issue 48): 500 seeded SIGKILLs of builders and servers mid-build under a random seed,
# an index file damaged every 5 kills, and each kind of damage 5 times over a whole index; prints the figures
# (kills survived, corruptions, time to recover, processes left behind, answers that differed from rg).
chaos: $(STAMP)
	FEDSEARCH_LOG_LEVEL=warning FEDSEARCH_CHAOS_KILLS=500 FEDSEARCH_CHAOS_ROUNDS=5 FEDSEARCH_CHAOS_SEED=random \
		$(BIN)/pytest tests/test_chaos.py \
		-p no:cacheprovider -s --timeout=7200

bench: $(STAMP)
	$(BIN)/python bench/merge.py
	$(BIN)/python bench/merge_path.py --against HEAD~1
	$(BIN)/python bench/local.py
	$(BIN)/python bench/local.py --http
	$(BIN)/python bench/local.py --http --copies 4
	$(BIN)/python bench/overhead.py
	$(BIN)/python bench/overhead.py --no-naive --tracing --interleave 400
	$(BIN)/python bench/overhead_wrk.py
	$(BIN)/python bench/namespaces.py --namespaces 100
	$(BIN)/python bench/namespaces.py
	$(BIN)/python bench/scale.py --short
	$(BIN)/python bench/answer_size.py
	$(BIN)/python bench/mcp_channels.py
	$(BIN)/python bench/dedup.py
	$(BIN)/python bench/openapi_checks.py --max-examples 20
	$(BIN)/python bench/content_engines.py
	$(BIN)/python bench/resilience.py
	$(BIN)/python bench/cache.py
	$(BIN)/python bench/index.py
	$(BIN)/python bench/prune.py --corpus $(CORPUS_REAL)
	$(BIN)/python bench/ranking.py
	$(BIN)/python bench/semantic.py
	$(BIN)/python bench/stream.py
	$(BIN)/python bench/page.py --against HEAD~1 --rounds 5
	$(BIN)/python bench/cli.py
	$(BIN)/python bench/globs.py
	$(BIN)/python bench/remote_read.py
	$(BIN)/python bench/load.py
	$(BIN)/python bench/fairness.py
	$(BIN)/python bench/many_namespaces.py --source $(CORPUS_REAL) --copies 32 --tiny 10000

# Issue 22's load test at its full length: 3 minutes at 1x, 2x and 4x capacity, then
# 10 minutes at 2x (about 20 minutes; over $(CORPUS_REAL), real checkouts outside the tree).
CORPUS_REAL ?= /work/corpus-real
soak: $(STAMP)
	$(BIN)/python bench/load.py --corpus $(CORPUS_REAL) --phase-s 180 --soak-s 600 --calibrate-s 60 --warmup-s 30

clean:
	rm -rf $(VENV) .coverage .pytest_cache .mypy_cache .ruff_cache
