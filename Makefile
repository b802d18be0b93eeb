# The workshop's commands. Each sets up what it needs (a venv in .venv/ from environment.yml)
# and is safe to run again.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
ENV_STAMP := $(VENV)/.installed
MATHJAX := book/_vendor/mathjax/tex-chtml.js
REVEAL := book/_vendor/reveal.js/dist/reveal.js
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg
JB_FLAGS := --config book/_config.yml --toc book/_toc.yml --path-output book -W -n --keep-going

WHEELHOUSE ?= wheelhouse
# With a wheelhouse (`make wheelhouse`, or the copy in a room kit) pip installs from it alone, offline.
PIP_SOURCE = $(if $(wildcard $(WHEELHOUSE)/requirements.txt),--no-index --find-links $(WHEELHOUSE))

.PHONY: env test test-book chromium book lab notebooks exercises timetables reset-exercise wheelhouse rehearse-trn2 clean

env: $(ENV_STAMP)

# Rebuilt whenever the dependency list or the package metadata changes.
$(ENV_STAMP): environment.yml pyproject.toml tools/requirements_from_env.py
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required, found " + sys.version.split()[0])'
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(PYTHON) tools/requirements_from_env.py > $(VENV)/requirements.txt
	$(if $(PIP_SOURCE),@echo "installing offline from $(WHEELHOUSE)/")
	$(VPY) -m pip install --quiet --disable-pip-version-check $(PIP_SOURCE) -r $(VENV)/requirements.txt
	$(VPY) -m pip install --quiet --disable-pip-version-check $(PIP_SOURCE) --no-deps -e .
	touch $@

# Every wheel of the environment (and the build backend of `pip install -e .`) in $(WHEELHOUSE)/,
# for laptops of the same OS, CPU and Python as this machine: with it, `make env` needs no network.
wheelhouse: env
	mkdir -p $(WHEELHOUSE)
	$(PYTHON) tools/requirements_from_env.py > $(WHEELHOUSE)/requirements.txt.partial
	$(VPY) -m pip download --quiet --disable-pip-version-check --dest $(WHEELHOUSE) \
	  -r $(WHEELHOUSE)/requirements.txt.partial "setuptools>=77"
	mv $(WHEELHOUSE)/requirements.txt.partial $(WHEELHOUSE)/requirements.txt
	@echo "$(WHEELHOUSE)/: $$(ls $(WHEELHOUSE)/*.whl | wc -l) wheels, $$(du -sh $(WHEELHOUSE) | cut -f1)"

# Unit tests + every notebook re-executed under nbval strict mode, on every core (a notebook's cells
# stay together on one worker; modules in collection order, where the `long` ones come first); the
# book's notebooks that pass are kept for `make book`. The cost model's calibration fits are computed
# first (minutes when cold, cached per code version), so no test waits on them under its timeout.
test: env
	$(VPY) benchmarks/calibration.py --fit-only
	$(VPY) -m pytest tests notebooks exercises solutions book $(NBVAL) -n auto --dist loadscope --no-loadscope-reorder

# MathJax served from the site itself, so pages render without a CDN.
$(MATHJAX):
	tmp=$$(mktemp -d) && npm install --silent --no-save --no-audit --no-fund --prefix "$$tmp" mathjax@3 \
	  && mkdir -p book/_vendor/mathjax && cp -r "$$tmp/node_modules/mathjax/es5/." book/_vendor/mathjax/ \
	  && rm -rf "$$tmp"

# reveal.js for the lesson slides, served from the site as MathJax is (tools/make_slides.py).
$(REVEAL):
	tmp=$$(mktemp -d) && npm install --silent --no-save --no-audit --no-fund --prefix "$$tmp" reveal.js@4 \
	  && mkdir -p book/_vendor/reveal.js \
	  && cp -r "$$tmp/node_modules/reveal.js/dist" "$$tmp/node_modules/reveal.js/plugin" book/_vendor/reveal.js/ \
	  && rm -rf "$$tmp"

# Executes (two at a time, on the default backend) every notebook whose outputs in the build's
# cache are stale (tools/book_outputs.py), then writes the site to book/_build/html, with one
# slide deck per lesson in book/_build/html/slides/.
book: env $(MATHJAX) $(REVEAL)
	$(VPY) tools/book_outputs.py
	$(VENV)/bin/jupyter-book build . $(JB_FLAGS)
	$(VPY) tools/make_slides.py

# Builds the site, then opens every page in headless Chromium (Debian's package, driven by
# Playwright; screenshots go to test-artifacts/).
test-book: book chromium
	$(VPY) -m pytest tests/book -p no:cacheprovider

chromium:
	command -v chromium >/dev/null || (apt-get update && apt-get install -y --no-install-recommends chromium)

# JupyterLab on 127.0.0.1:LAB_PORT with a fresh token, so the address to open is known before the
# server starts; a browser opens where there is one. A busy port fails (make lab LAB_PORT=8890).
LAB_PORT ?= 8888
lab: env
	@token=$$($(VPY) -c 'import secrets; print(secrets.token_hex(16))'); \
	echo ""; echo "  JupyterLab: open  http://127.0.0.1:$(LAB_PORT)/lab?token=$$token"; \
	echo "  then notebooks/00_setup.ipynb (the setup check). Stop with Ctrl-C."; echo ""; \
	$(VENV)/bin/jupyter lab --config=tools/jupyter_server_config.py --ServerApp.port=$(LAB_PORT) \
	  --ServerApp.port_retries=0 --IdentityProvider.token=$$token

# Re-executes every stored notebook in place (after changing code that notebooks use).
notebooks: env
	$(VPY) tools/execute_notebooks.py

# Regenerates exercises/*.ipynb and solutions/*.ipynb (executed) and the book's table of
# exercises from the annotated sources in exercises/src/, then the tables of times (an exercise's
# time is one of their sources).
exercises: env
	$(VPY) tools/make_exercises.py
	$(VPY) tools/make_timetables.py

# Rewrites the generated tables of times (landing page, agendas) and README's table of exercises
# from each lesson's and exercise's own time and the agendas' rows.
timetables: env
	$(VPY) tools/make_timetables.py

# A fresh copy of one exercise for a learner: make reset-exercise EX=4 (or EX=04). Their copy is
# kept as a numbered backup (exercises/04_*.ipynb.bak1, then .bak2, ...): a reset never loses work.
reset-exercise: env
	@test -n "$(EX)" || { echo "usage: make reset-exercise EX=4  (the exercise number, 4 or 04)"; exit 2; }
	$(VPY) tools/make_exercises.py --reset $(EX)

# The trn2 hardware path rehearsed on the CPU (README, "On a Trainium2 instance"): every lesson,
# solution and book notebook (outputs not written back) and benchmarks/hardware_validation.py run
# with NKISIM_REHEARSE_TRN2=1; fails on any error.
rehearse-trn2: env
	$(VPY) tools/rehearse_trn2.py

clean:
	rm -rf book/_build book/_vendor build
