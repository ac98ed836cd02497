# Entry points. `make up` runs the main job on the local default; `make test` runs every check.
# Both create the virtual environment and obtain the pinned upstream tools first (idempotent).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
FLEETPLANE := $(VENV)/bin/fleetplane

.PHONY: help up down status venv tools lint test test-fast policy-check image clean

help:
	@echo "make up         the main job: local GPU/TPU fleet, real pulumi up of the local stack,"
	@echo "                one controller pass, fleet summary (fleetplane up)"
	@echo "make down       pulumi destroy, then stop OPA, Prometheus and the local cluster"
	@echo "make status     the running local fleet (fleetplane status)"
	@echo "make test       lint, policy checks and the whole test suite against real parts"
	@echo "make test-fast  the tests that need no server (no integration or e2e marker)"
	@echo "make tools      obtain the pinned upstream tools into tools/bin"
	@echo "make image      build the controller's and OPA's OCI images (.fleet/images; root, mmdebstrap)"
	@echo "make venv       create .venv with fleetplane (editable) and its development extras"

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

tools:
	$(PYTHON) -m tools.bootstrap

# What the image build (mmdebstrap) and the report's screenshot test (chromium) need from
# Debian, installed system-wide because they are programs with many dependencies of their own
# rather than single binaries the bootstrap can unpack. Idempotent: apt runs only when missing.
SYSTEM_PACKAGES := mmdebstrap chromium
system-packages:
	@missing=""; for p in $(SYSTEM_PACKAGES); do command -v $$p >/dev/null || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

up: venv tools
	$(FLEETPLANE) up

down: venv
	$(FLEETPLANE) down

status: venv
	$(FLEETPLANE) status

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy $(wildcard fleetplane fleet components controller replay policyreview localfleet images observability tools stacks bench placement)
	$(VENV)/bin/lint-imports
	$(PY) -m tools.check_file_sizes

image: venv tools system-packages
	$(FLEETPLANE) image build

policy-check: venv tools
	$(FLEETPLANE) policy test

test: venv tools system-packages lint policy-check
	$(PY) -m pytest

test-fast: venv
	$(PY) -m pytest -m "not integration and not e2e"

clean:
	rm -rf $(VENV) tools/bin .fleet
