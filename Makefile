# tfdoctor: `make app` sets up and opens the app, `make test` sets up and runs every check.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
APP_STAMP := $(VENV)/.installed-app
DEV_STAMP := $(VENV)/.installed-dev
# The official CPU-only TensorFlow build (same version as the venv's), unpacked once at set-up
# for the tests that check a real tensorflow-cpu install: tests download nothing while running.
TF_CPU := $(VENV)/opt/tensorflow-cpu

.PHONY: app test test-fast setup lint perf clean bundle

# The app and its TensorFlow extra (the app's own Python can then be checked too).
$(APP_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[tensorflow]'
	touch $(APP_STAMP)

# Everything the tests need on top: linters, pytest, and the tensorflow-cpu build.
$(DEV_STAMP): $(APP_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[tensorflow,dev]'
	v=$$($(BIN)/python -c 'from importlib.metadata import version; print(version("tensorflow"))'); \
	if [ "$$(cat $(TF_CPU)/.complete 2>/dev/null)" != "$$v" ]; then \
		rm -rf $(TF_CPU) && \
		$(BIN)/python -m pip install --quiet --no-deps --target $(TF_CPU) "tensorflow-cpu==$$v" && \
		echo "$$v" > $(TF_CPU)/.complete; \
	fi
	@# strace injects the kills of the crash-point tests (Debian's package; root installs it)
	@command -v strace >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& apt-get update -qq && apt-get install -y -qq strace >/dev/null; } \
		|| echo "note: strace is not installed: the crash-point tests will be skipped"
	touch $(DEV_STAMP)

setup: $(DEV_STAMP)

app: $(APP_STAMP)
	$(BIN)/tfdoctor

lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy -p tfdoctor.core -p tfdoctor.gui

test: lint
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q

# The day-to-day lane: no test that imports TensorFlow (those are marked slow), no lint.
test-fast: $(DEV_STAMP)
	QT_QPA_PLATFORM=offscreen PYTHONPATH=tests/fastlane $(BIN)/python -m pytest -q -m "not slow"

perf: $(DEV_STAMP)
	$(BIN)/python tests/perf/bench_check.py
	$(BIN)/python tests/perf/bench_diagnose.py
	$(BIN)/python tests/perf/bench_supervisor.py
	$(BIN)/python tests/perf/bench_gui.py
	$(BIN)/python tests/perf/bench_events.py
	$(BIN)/python tests/perf/bench_monitor.py
	$(BIN)/python tests/perf/bench_corpus.py --by-cause

# The one-folder desktop bundle dist/tfdoctor/ (PyInstaller, no TensorFlow inside; see
# packaging/README.md), then the bundled app opened offscreen: a bundle that cannot start fails.
bundle: $(DEV_STAMP)
	$(BIN)/python -m PyInstaller --noconfirm --log-level WARN --distpath dist \
		--workpath build/pyinstaller packaging/tfdoctor.spec
	QT_QPA_PLATFORM=offscreen dist/tfdoctor/tfdoctor --smoke-test

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
