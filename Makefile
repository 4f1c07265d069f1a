# Two commands do all set-up on a fresh machine: `make run` serves, `make test` tests.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements.stamp
MEMORY_HOST ?= 127.0.0.1
MEMORY_PORT ?= 8000

.PHONY: install migrate run test test-postgres lint demo doctor

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstalls only when requirements.txt changes; pip shows each package as it goes (the first install takes minutes).
$(STAMP): requirements.txt | $(PY)
	@echo "Installing requirements.txt into $(VENV): about 2 GB, a few minutes the first time (README: Install)."
	$(PY) -m pip install --disable-pip-version-check -r requirements.txt
	touch $(STAMP)

install: $(STAMP)

migrate: install
	$(PY) manage.py migrate --noinput -v 0

run: migrate
	$(PY) manage.py serve --host $(MEMORY_HOST) --port $(MEMORY_PORT)

test: install
	$(PY) -m pytest

# ruff's lint and its format check (pyproject.toml); `$(VENV)/bin/ruff format .` formats.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The suite against a throwaway PostgreSQL cluster (Debian's postgresql package).
test-postgres: install
	$(PY) -m tests.postgres

demo: migrate
	$(PY) manage.py load_demo

doctor: migrate
	$(PY) manage.py doctor
