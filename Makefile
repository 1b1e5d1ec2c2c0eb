# tfdoctor: `make app` sets up and opens the app, `make test` sets up and runs every check.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
APP_STAMP := $(VENV)/.installed-app
DEV_STAMP := $(VENV)/.installed-dev
# The official CPU-only TensorFlow build (same version as the venv's), unpacked once at set-up
# for the tests that check a real tensorflow-cpu install: tests download nothing while running.
TF_CPU := $(VENV)/opt/tensorflow-cpu
# what Qt's xcb platform loads (PySide6 wheels carry Qt, not these)
X_LIBS := libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0 \
	libxcb-render-util0 libxcb-shape0 libxcb-xfixes0 libxcb-xkb1 libxcb-sync1 \
	libxkbcommon-x11-0 libegl1 libgl1 libfontconfig1 libdbus-1-3 libglib2.0-0
# the libraries those packages give, one each: any missing means install them all (an image can
# hold some of them, pulled in by something else)
X_SONAMES := libxcb-cursor.so.0 libxcb-icccm.so.4 libxcb-image.so.0 libxcb-keysyms.so.1 \
	libxcb-randr.so.0 libxcb-render-util.so.0 libxcb-shape.so.0 libxcb-xfixes.so.0 libxcb-xkb.so.1 \
	libxcb-sync.so.1 libxkbcommon-x11.so.0 libEGL.so.1 libGL.so.1 libfontconfig.so.1 \
	libdbus-1.so.3 libglib-2.0.so.0

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
	@# Debian's packages, installed when root: strace injects the kills of the crash-point
	@# tests; Xvfb, Qt's X libraries and a font run the real-window tests (tools/window_tour.py);
	@# headless Chromium renders the HTML report in its test
	@pkgs=""; command -v strace >/dev/null || pkgs="strace"; \
	command -v Xvfb >/dev/null || pkgs="$$pkgs xvfb"; \
	command -v chromium >/dev/null || pkgs="$$pkgs chromium"; \
	for so in $(X_SONAMES); do \
		ldconfig -p | grep -q "$$so " || { pkgs="$$pkgs $(X_LIBS)"; break; }; \
	done; \
	fc-list 2>/dev/null | grep -qi dejavu || pkgs="$$pkgs fonts-dejavu-core"; \
	if [ -n "$$pkgs" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
				apt-get install -y -qq --no-install-recommends $$pkgs >/dev/null; \
		else echo "note: not installed:$$pkgs (as root, make setup installs them): the" \
			"tests that need them are skipped"; fi; \
	fi
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
	$(BIN)/python tests/perf/bench_patterns.py
	$(BIN)/python tests/perf/bench_supervisor.py
	$(BIN)/python tests/perf/bench_gui.py
	$(BIN)/python tests/perf/bench_events.py
	$(BIN)/python tests/perf/bench_monitor.py
	$(BIN)/python tests/perf/bench_watch.py
	$(BIN)/python tests/perf/bench_report.py
	$(BIN)/python tests/perf/bench_corpus.py --by-cause

# The one-folder desktop bundle dist/tfdoctor/ (PyInstaller, no TensorFlow inside; see
# packaging/README.md), then the bundled app opened offscreen: a bundle that cannot start fails.
bundle: $(DEV_STAMP)
	$(BIN)/python -m PyInstaller --noconfirm --log-level WARN --distpath dist \
		--workpath build/pyinstaller packaging/tfdoctor.spec
	QT_QPA_PLATFORM=offscreen dist/tfdoctor/tfdoctor --smoke-test

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
