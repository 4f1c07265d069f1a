# Two commands do all set-up on a fresh machine: `make run` serves, `make test` tests.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements.stamp
TEST_STAMP := $(VENV)/.requirements-test.stamp
MEMORY_HOST ?= 127.0.0.1
MEMORY_PORT ?= 8000

.PHONY: install install-test migrate run test test-postgres lint demo doctor

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstalls only when requirements.txt changes; pip shows each package as it goes (the first install takes minutes).
$(STAMP): requirements.txt | $(PY)
	@echo "Installing requirements.txt into $(VENV): about 2 GB, a few minutes the first time (README: Install)."
	$(PY) -m pip install --disable-pip-version-check -r requirements.txt
	touch $(STAMP)

install: $(STAMP)

# The test tools on top (pytest, playwright, ruff, ...): for the targets that test or lint, never for `make run`.
$(TEST_STAMP): requirements-test.txt $(STAMP)
	@echo "Installing requirements-test.txt (the test tools) into $(VENV)."
	$(PY) -m pip install --disable-pip-version-check -r requirements-test.txt
	touch $(TEST_STAMP)

install-test: $(TEST_STAMP)

migrate: install
	$(PY) manage.py migrate --noinput -v 0

run: migrate
	$(PY) manage.py serve --host $(MEMORY_HOST) --port $(MEMORY_PORT)

test: install-test
	$(PY) -m pytest

# ruff's lint and its format check (pyproject.toml); `$(VENV)/bin/ruff format .` formats.
lint: install-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The suite against a throwaway PostgreSQL cluster (Debian's postgresql package).
test-postgres: install-test
	$(PY) -m tests.postgres

demo: migrate
	$(PY) manage.py load_demo

doctor: migrate
	$(PY) manage.py doctor
