# Entry points. `make up` runs the main job on the local default; `make test` runs every check.
# Both create the virtual environment and obtain the pinned upstream tools first (idempotent).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: help up down status venv tools lint test test-fast policy-check clean

help:
	@echo "make up         the main job: local GPU/TPU fleet, real pulumi up of the local stack,"
	@echo "                one controller pass, fleet summary"
	@echo "make down       pulumi destroy, then stop OPA, Prometheus and the local cluster"
	@echo "make test       lint, policy checks and the whole test suite against real parts"
	@echo "make tools      obtain the pinned upstream tools into tools/bin"
	@echo "make venv       create .venv with the project and its test dependencies"

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

tools:
	$(PYTHON) -m tools.bootstrap

up: venv tools
	$(PY) -m tools.localstack up

down: venv
	$(PY) -m tools.localstack down

status: venv
	$(PY) -m tools.localstack status

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy $(wildcard components controller tools stacks bench)

policy-check: tools
	$(PY) -m tools.policycheck

test: venv tools lint policy-check
	$(PY) -m pytest

clean:
	rm -rf $(VENV) tools/bin .fleet
