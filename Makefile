# Two commands: `make demo` and `make test`.  Everything else is a helper.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.installed
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: demo test install migrate check-migrations lint format-check worker beat clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

migrate: $(STAMP)
	$(PY) manage.py migrate --no-input -v0

## make demo [PORT=8010]: SQLite, in-process background work, three simulated clusters, http://127.0.0.1:8000
demo: migrate
	GPUBROKER_USAGE_INTERVAL_S=$${GPUBROKER_USAGE_INTERVAL_S:-60} GPUBROKER_SAMPLE_INTERVAL_S=$${GPUBROKER_SAMPLE_INTERVAL_S:-30} \
		$(PY) manage.py demo --addrport $(HOST):$(PORT)

## make test: the whole suite (set DATABASE_URL / CELERY_BROKER_URL to use real services)
test: $(STAMP)
	$(PY) manage.py makemigrations --check --dry-run -v0
	$(PY) -m pytest $(PYTEST_ARGS)

## make lint: ruff (lint and format), mypy with the Django and DRF plugins, the import-linter layer contracts
lint: $(STAMP)
	$(VENV)/bin/ruff check config broker accounting portal demo gpubroker_cli
	$(VENV)/bin/ruff format --check config broker accounting portal demo gpubroker_cli
	$(VENV)/bin/mypy
	PYTHONPATH=. $(VENV)/bin/lint-imports

format-check: $(STAMP)
	$(VENV)/bin/ruff format --check config broker accounting portal demo gpubroker_cli

check-migrations: $(STAMP)
	$(PY) manage.py makemigrations --check --dry-run

worker: $(STAMP)
	$(VENV)/bin/celery -A config worker -l info --concurrency 2

beat: $(STAMP)
	$(VENV)/bin/celery -A config beat -l info

clean:
	rm -rf $(VENV) db.sqlite3 .pytest_cache
