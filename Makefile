# Development tasks. `make venv` once, then `make test` while working and `make check` before a commit.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The fast tier: unit and pylance interop tests; no JVM, no S3/Azure/GCS server, no races, no 100k-row corpus.
FAST := not spark and not s3 and not azure and not gcs and not stress and not corpus

.PHONY: venv test test-all lint format check wheel-check docs

venv: $(PY)

$(PY): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -e '.[test,dev]' --config-settings editable_mode=compat
	touch $(PY)

test: venv
	$(PY) -m pytest -q -n 2 -m "$(FAST)"

test-all: venv
	$(PY) -m pytest -n 2

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy lance_table pyspark_lance_table

format: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

check: lint test-all

docs: venv
	$(VENV)/bin/pip install -q -e '.[docs]' --config-settings editable_mode=compat
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -d site
