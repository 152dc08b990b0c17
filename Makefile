# Developer entry points. `make run` serves, `make test` is what CI runs (.ci/run).
#
#   make run  [HOST=0.0.0.0] [PORT=8000]   runtime install into .venv, then start the server
#                                           (on 127.0.0.1, or NMT_HOST, unless HOST is given)
#   make test                               dev install, system packages, ruff, mypy, pytest
#   make system-packages                    the Debian packages the tests use (apt, as root)
#   make weblate-venv                       Weblate's machinery in a venv of its own (the tests
#                                           check Weblate's backends against the server)
#   make bench-engine [QUICK=1] [DATA=..]   engine speed against peers
#   make bench-markup / bench-glossary [QUICK=1] [DATA=..]   tags, placeholders, glossary and TBX terms
#   make bench-documents [DOCS=folder] [FORMATS=docx,..] [QUICK=1]  whole files vs /translate/batch
#   make bench-quality [QUICK=1] [DATA=..]  fit the quality estimator, measure it
#   make bench-corrections [QUICK=1] [DATA=..]   a domain refreshed from corrections
#   make bench-memories [QUICK=1] [DATA=..] [DIRECTION=fr-en]  translation memories: import,
#                                  lookup, coverage; retrieval during decoding (BLEU, speed;
#                                  resumable: parts kept in MEMORIES_WORK); calibrated gates
#   make bench-tenants [QUICK=1] [DATA=..]   1,000 tenants' modules: residency, spread, registry
#   make serve-ray [REPLICAS=2] [PORT=8000] N replicas behind Ray Serve's proxy (local cluster,
#                                           or the one at RAY_ADDRESS); Ctrl-C stops it all
#
# Installs are stamped: .venv/.installed (dev) and .venv/.installed-runtime (runtime only) are
# rebuilt when pyproject.toml changes (or a package appears), so repeated runs stay offline.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
# Empty: the server's own default (127.0.0.1, or NMT_HOST) so a developer's machine does not
# expose the API (admin included) on every interface; HOST=0.0.0.0 listens on all of them.
HOST   ?=
PORT   ?= 8000
DATA   ?= ../shared/data
QUICK  ?=
REPLICAS ?= 2
# torch is installed on its own first: on this machine pip's find-links holds the CPU wheel
# for exactly this pin; it then satisfies the pyproject pin without pulling CUDA packages.
TORCH_PIN := torch==2.13.0

# The Debian packages of the programs the tests run (tests/services.py says which program
# needs which; tests/contract/test_system_programs.py checks that each is listed here). Run
# as root where apt exists, `make test` installs the missing ones; elsewhere it names them,
# and each test that needs one skips, naming its package. dpkg-query tells what is missing,
# so a machine that has them all stays offline.
SYSTEM_PACKAGES := postgresql chromium libreoffice-writer-nogui libreoffice-calc-nogui \
                   libreoffice-impress-nogui pandoc gcc libc6-dev curl git make \
                   python3-venv python3-gi-cairo gir1.2-pango-1.0
APT_GET ?= apt-get

# An editable install maps the top-level packages that exist when it runs: reinstall when
# pyproject.toml changes or when a package appears.
INSTALL_DEPS  := pyproject.toml $(wildcard contract/__init__.py launch/__init__.py server/__init__.py model_store/__init__.py \
                   converters/__init__.py trainer/__init__.py)
DEV_STAMP     := $(VENV)/.installed
RUNTIME_STAMP := $(VENV)/.installed-runtime
RAY_STAMP     := $(VENV)/.installed-ray

HOST_FLAG := $(if $(HOST),--host $(HOST),)

# Weblate's machinery classes, which tests/server/test_weblate_machinery.py runs against the
# server, in a venv of their own: Weblate pins lxml and translate-toolkit below ours. It is
# made from Debian's Python with its packages visible, for the GObject and cairo bindings
# that Weblate imports (python3-gi-cairo, gir1.2-pango-1.0: SYSTEM_PACKAGES); the rest comes
# from PyPI, pinned in tests/weblate/requirements.txt (--no-deps: Weblate's own dependency
# list builds C extensions that its machinery never uses; --ignore-installed: Debian's copies
# of the pinned packages do not count). Rebuilt when the pins change. It lives in the user's
# cache folder, beside the int8 kernel's, so that every checkout on the machine shares it
# (and no test that walks the repository meets it); the test looks there too.
WEBLATE_VENV   ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/nmt-server/weblate-venv
WEBLATE_PYTHON ?= /usr/bin/python3
WEBLATE_PINS   := tests/weblate/requirements.txt
WEBLATE_STAMP  := $(WEBLATE_VENV)/.installed

# --quick is passed to the benchmarks only when QUICK is set to something other than 0.
QUICK_FLAG := $(if $(filter-out 0,$(QUICK)),--quick,)
# make eval / eval-router DIRECTION=fr-en: the fr->en backbone (docs/DIRECTIONS.md)
DIRECTION_FLAG := $(if $(DIRECTION),--direction $(DIRECTION),)
# make bench-memories keeps each finished part here: a killed run started again continues
MEMORIES_WORK ?= runs/bench-memories
# a dev grid to choose the retrieval settings from (benchmarks/quality/memory_retrieval.py),
# e.g. --weights 0.5 0.7; empty: the server's settings, each memory's gate calibrated
RETRIEVAL_GRID ?=

.PHONY: venv venv-runtime system-packages weblate-venv run serve-ray bench-ray test lint bench-engine bench-serve bench-adversarial bench-adversarial-compare bench-bulk-share bench-hot-add-load bench-mixed-lengths bench-live-engine bench-markup bench-glossary bench-documents bench-quality bench-corrections bench-memories bench-tenants eval eval-router train-default learning-curve bench-backbone screenshots clean distclean

venv: $(DEV_STAMP)

venv-runtime: $(RUNTIME_STAMP)

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

$(DEV_STAMP): $(INSTALL_DEPS) | $(VENV)/bin/python
	$(PIP) install $(TORCH_PIN)
	$(PIP) install -e '.[dev]'
	touch $(DEV_STAMP) $(RUNTIME_STAMP) $(RAY_STAMP)

$(RUNTIME_STAMP): $(INSTALL_DEPS) | $(VENV)/bin/python
	$(PIP) install $(TORCH_PIN)
	$(PIP) install -e .
	touch $(RUNTIME_STAMP)

$(RAY_STAMP): $(INSTALL_DEPS) | $(VENV)/bin/python
	$(PIP) install $(TORCH_PIN)
	$(PIP) install -e '.[ray]'
	touch $(RAY_STAMP) $(RUNTIME_STAMP)

# Without recommended packages: the tests need none of them (LibreOffice converts, Chromium
# runs headless, PostgreSQL serves without them), and apt installs half as many packages.
system-packages:
	@if ! command -v dpkg-query >/dev/null; then \
	    echo "not a Debian system: the tests that need a program of $(SYSTEM_PACKAGES) skip without it"; \
	    exit 0; \
	fi; \
	missing=$$(for package in $(SYSTEM_PACKAGES); do \
	    dpkg-query -W -f='$${db:Status-Abbrev}' $$package 2>/dev/null | grep -q '^ii' || echo $$package; \
	done); \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v $(APT_GET) >/dev/null; then \
	    echo "installing the tests' system packages:" $$missing; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    $(APT_GET) update -q && $(APT_GET) install -y -q --no-install-recommends $$missing; \
	else \
	    echo "missing system packages (make test installs them when run as root with apt;" \
	         "the tests that need them skip):" $$missing; \
	fi

# Without Debian's Python (not a Debian system) it says so and stops there: the Weblate tests
# then skip, naming this target (they fail in CI).
weblate-venv: $(WEBLATE_STAMP)

$(WEBLATE_STAMP): $(WEBLATE_PINS) | system-packages
	@if [ ! -x $(WEBLATE_PYTHON) ]; then \
	    echo "no $(WEBLATE_PYTHON): the Weblate venv is not built (its tests skip)"; exit 0; \
	fi; \
	rm -rf $(WEBLATE_VENV) && \
	$(WEBLATE_PYTHON) -m venv --system-site-packages $(WEBLATE_VENV) && \
	$(WEBLATE_VENV)/bin/pip install -q --no-deps --ignore-installed -r $(WEBLATE_PINS) && \
	touch $(WEBLATE_STAMP)

run: $(RUNTIME_STAMP)
	$(PY) -m server $(HOST_FLAG) --port $(PORT)

serve-ray: $(RAY_STAMP)
	$(PY) -m server.ray_serve --replicas $(REPLICAS) $(HOST_FLAG) --port $(PORT)

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy contract launch server model_store converters trainer

test: $(DEV_STAMP) system-packages $(WEBLATE_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy contract launch server model_store converters trainer
	$(VENV)/bin/pytest -q

bench-engine: $(DEV_STAMP)
	$(PY) -m benchmarks.speed.engine.engine_speed --data $(DATA) $(QUICK_FLAG)

bench-serve: $(DEV_STAMP)
	$(PY) -m benchmarks.speed.serve.$(if $(DIRECTIONS),serve_directions,serve_load) --data $(DATA) $(QUICK_FLAG) $(if $(FRONT_CPUS),--front-cpus $(FRONT_CPUS)) $(if $(STATIC),--static)

bench-ray: $(DEV_STAMP)
	$(PY) -m benchmarks.speed.serve.ray_replicas --data $(DATA) $(QUICK_FLAG)

bench-adversarial: $(DEV_STAMP)
	$(PY) -m benchmarks.speed.adversarial.adversarial --data $(DATA) $(QUICK_FLAG) $(if $(STATIC),--static)

bench-adversarial-compare: $(DEV_STAMP)
	$(PY) -m benchmarks.speed.adversarial.adversarial_compare --data $(DATA) $(QUICK_FLAG)

# Bulk clients (a 64 x 900-character batch client and the LibreTranslate client) beside a
# polite client and 40 documents: every legal request answered
bench-bulk-share: $(DEV_STAMP)
	$(PY) -m benchmarks.speed.adversarial.bulk_share --data $(DATA) $(if $(STATIC),--static)

# The sidecar's share: a hot add on a quiet server and beside 16 busy clients, a polite
# client measured alone and beside them
bench-hot-add-load: $(DEV_STAMP)
	$(PY) -m benchmarks.speed.serve.hot_add_load --data $(DATA) $(QUICK_FLAG) $(if $(STATIC),--static)

bench-mixed-lengths: $(DEV_STAMP)
	$(PY) -m benchmarks.speed.batching.mixed_lengths --data $(DATA) $(QUICK_FLAG)

bench-live-engine: $(DEV_STAMP)
	$(PY) -m benchmarks.speed.batching.live_engine --data $(DATA) $(QUICK_FLAG)

bench-markup: $(DEV_STAMP)
	$(PY) -m benchmarks.quality.text.markup --data $(DATA) $(QUICK_FLAG)

bench-glossary: $(DEV_STAMP)
	$(PY) -m benchmarks.quality.text.glossary --data $(DATA) $(QUICK_FLAG)
	$(PY) -m benchmarks.quality.text.terminology --data $(DATA) $(QUICK_FLAG)

bench-documents: $(DEV_STAMP)
	$(PY) -m benchmarks.documents.run --data $(DATA) $(QUICK_FLAG) $(if $(DOCS),--path $(DOCS)) $(if $(FORMATS),--formats $(FORMATS)) $(if $(ROUNDS),--rounds $(ROUNDS))

# Issue #44: fit the built-in backbone's quality estimator on the dev sets (writes
# model_store/builtin/quality/), then Spearman/flagging/recovery/cost on the test sets.
bench-quality: $(DEV_STAMP)
	$(PY) -m benchmarks.quality.estimation.quality_estimation --data $(DATA) $(QUICK_FLAG)

# A domain refreshed from corrections (simulated from its test split) and poisoned
# refreshes that must not be published (benchmarks/results/corrections.md).
bench-corrections: $(DEV_STAMP)
	$(PY) -m benchmarks.quality.corrections.corrections --data $(DATA) $(QUICK_FLAG)

# Translation memories: TMX import time, lookup time at 100k pairs, how many test
# sentences a memory of the domain's training pairs matches (benchmarks/results/memories.md);
# part 2, retrieval during decoding: BLEU with and without memories, speed
# (benchmarks/results/memory_retrieval[-fr-en].md; DIRECTION=fr-en for the other side).
bench-memories: $(DEV_STAMP)
	$(PY) -m benchmarks.quality.memories --data $(DATA) $(QUICK_FLAG)
	$(PY) -m benchmarks.quality.memory_retrieval --data $(DATA) $(QUICK_FLAG) $(DIRECTION_FLAG) \
		--work $(MEMORIES_WORK) $(RETRIEVAL_GRID)
	$(PY) -m benchmarks.quality.gate_calibration --data $(DATA) $(DIRECTION_FLAG)

bench-tenants: $(DEV_STAMP)
	$(PY) -m benchmarks.speed.tenants.tenants --data $(DATA) $(QUICK_FLAG)

eval: $(DEV_STAMP)
	$(PY) -m benchmarks.quality.evaluation.evaluate --data $(DATA) $(QUICK_FLAG) $(DIRECTION_FLAG)

# The router alone: accuracy per domain, and open-genre BLEU of routing policies vs backbone.
eval-router: $(DEV_STAMP)
	$(PY) -m benchmarks.quality.router.router --data $(DATA) $(DIRECTION_FLAG)

# The web page's screenshots in docs/images (embedded default model, a training job on
# real finance pairs from DATA; Chromium at /usr/bin/chromium).
screenshots: $(DEV_STAMP)
	$(PY) docs/screenshots.py --data $(DATA)

train-default: $(RUNTIME_STAMP)
	$(PY) -m trainer.recipes.default_en_fr --data $(DATA)

# Issue #24's backbone measurements: the learning curve of a run's checkpoint copies
# (CURVE: step-N.pt + step-N.progress.json; RUN: the run dir) and short runs at equal CPU
# time warm-started from INIT (T=1 vs T=3 sampling).
RUN ?= runs/default-en-fr
CURVE ?= runs/curve
INIT ?= $(RUN)/backbone/checkpoint.pt
learning-curve: $(DEV_STAMP)
	$(PY) -m benchmarks.quality.backbone.learning_curve --curve $(CURVE) --run-files $(RUN) --data $(DATA)

bench-backbone: $(DEV_STAMP)
	$(PY) -m benchmarks.quality.backbone.backbone_experiments run t1 t3 --base $(RUN) --init $(INIT) \
		--work runs/backbone-experiments --data $(DATA)

clean:
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -exec rm -rf {} +
	rm -rf .mypy_cache .ruff_cache .pytest_cache build dist *.egg-info benchmarks/results/tmp

distclean: clean
	rm -rf $(VENV) $(WEBLATE_VENV)
