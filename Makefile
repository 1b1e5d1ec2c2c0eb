# tfdoctor: `make app` sets up and opens the app, `make test` sets up and runs every check.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: app test setup lint perf clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

app: $(STAMP)
	$(BIN)/tfdoctor

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy -p tfdoctor.core

test: lint
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q

perf: $(STAMP)
	$(BIN)/python tests/perf/bench_check.py
	$(BIN)/python tests/perf/bench_diagnose.py
	$(BIN)/python tests/perf/bench_supervisor.py
	$(BIN)/python tests/perf/bench_gui.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
