# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv when missing.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: notebooks demo test test-slow fuzz lint format bench clean venv docs docs-test

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || { base=$$(tools/find_python.sh) && $$base -m venv $(VENV); }
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

demo: $(STAMP)
	$(PY) -m pymc_dp.demo

test: $(STAMP)
	$(PY) -m pytest -q -n auto

test-slow: $(STAMP)
	$(PY) -m pytest -q -n auto -m slow

# random exploration of the property-based fuzz (make test runs the same fixed cases every
# time): new inputs every run, 10x the examples; a failure it finds becomes a fixed example
# (see the docstring of tests/test_fuzz.py)
fuzz: $(STAMP)
	PYMC_DP_FUZZ_RANDOM=1 $(PY) -m pytest -q -n auto tests/test_fuzz.py tests/test_fuzz_release.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# the Sphinx site, warnings as errors; needs the docs extra: $(PY) -m pip install -e ".[dev,docs]".
# -E and fresh API stubs: an incremental build would not repeat the warnings of unchanged pages;
# a fresh output folder: viewcode keeps a stale source page (old layout, old links) otherwise.
docs: $(STAMP)
	@$(PY) -c "import importlib, sphinx, pydata_sphinx_theme, myst_nb, numpydoc; \
	  importlib.import_module('sphinx-mathjax-offline')" 2>/dev/null \
	  || $(PY) -m pip install --quiet -e ".[dev,docs]"
	rm -rf docs/api/generated docs/_build/html
	$(PY) -m sphinx -E -W --keep-going -b html docs docs/_build/html

# after `make docs`: the built site in headless Chromium (formulas typeset offline, navigation on
# every page). Debian's chromium package is installed when missing (needs root, as CI has).
docs-test: $(STAMP)
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
	  || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	       --no-install-recommends chromium; }
	PYMC_DP_DOCS_SITE_REQUIRED=1 $(PY) -m pytest -q -p no:cacheprovider tests/test_docs_site.py

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache build dist *.egg-info

# re-execute the teaching notebooks at full size and store their outputs (.ipynb beside the .md)
notebooks: $(STAMP)
	$(PY) tests/notebooks/nbrun.py notebooks/*.md
