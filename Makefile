# Everything runs inside a project-local virtual environment (.venv), created on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ARGS ?=
TASK ?= transfer_cube

.PHONY: prereqs install lock test test-slow demo experts bench gpu-check gpu-check-paper clean

# What the machine must provide (the Python version, its venv module, a headless GL library): one error: line
# each, naming the package to install, before anything is installed. Standard library only, well under a second.
prereqs:
	@$(PYTHON) scripts/check_prereqs.py --venv $(VENV)

install: prereqs $(STAMP)

# requirements/lock.txt pins the whole tree (the dependencies, the dev extra, pip itself) with the hash of every file
# PyPI has for each version: pip refuses any other file. --no-deps: the lock is complete as make lock resolved it, and
# leaves labmaze out on Python 3.13 (requirements/overrides.txt). The project goes on top, built by the lock's
# setuptools. A fresh .venv downloads 3.44 GB, torch and its CUDA libraries 3.0 of it (R2; docs/install.md).
$(STAMP): pyproject.toml requirements/lock.txt | prereqs
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --require-hashes --no-deps -r requirements/lock.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

# Refresh requirements/lock.txt (scripts/lock.sh, uv from PyPI in a throwaway venv, about 20 s): keeps every pin
# pyproject.toml still allows; make lock ARGS=--upgrade takes the newest of everything.
lock:
	PYTHON=$(PYTHON) bash scripts/lock.sh $(ARGS)

# One pytest worker per core (pytest-xdist), one thread each (tests/conftest.py); idle workers steal
# queued tests, so the run does not end on one worker's backlog.
# ruff first (lint, then the formatter's check: seconds), so a style slip fails before the 3-minute run.
test: install
	$(PY) -m ruff check --quiet . && $(PY) -m ruff format --check --quiet .
	$(PY) -m pytest -q -m "not slow" -n auto --dist worksteal

test-slow: install
	$(PY) -m pytest -q -m slow

# The main job: install, record 100 demos, train the CPU quickstart ACT, evaluate 50 episodes, plot.
# Under 45 minutes on 2 CPU cores; rerun to resume. Extra Hydra overrides: make demo ARGS="...".
# make demo TASK=insertion: the quickstart's recipe on insertion (experiment=cpu_quickstart_insertion).
DEMO_TASK_ARGS := $(if $(filter transfer_cube,$(TASK)),,experiment=cpu_quickstart_$(TASK))
demo:
	@DEMO_START=$$(date +%s); $(MAKE) --no-print-directory install && \
	DEMO_START=$$DEMO_START $(PY) scripts/demo.py $(DEMO_TASK_ARGS) $(ARGS)

# The scripted experts on a few seeds of each task, with a video (a check of the simulator alone).
experts: install
	$(PY) scripts/scripted_rollout.py task=transfer_cube num_episodes=5 num_videos=1 out_dir=outputs/experts/transfer_cube
	$(PY) scripts/scripted_rollout.py task=insertion num_episodes=5 num_videos=1 out_dir=outputs/experts/insertion

bench: install
	$(PY) scripts/bench_env.py out_dir=outputs/bench_env

# The checks that need a GPU, one command of at most 540 s (docs/gpu.md); one line and exit 2 without CUDA.
# gpu-check-paper, a second command into the same out_dir, continues the paper preset from its checkpoint.
# On a lent GPU machine with no PyPI: bash scripts/gpu_bundle.sh here, then there (out_dir inside the working tree,
# which a warm machine keeps between commands; copy gpu_check.json and gpu_check.md to $$OUT after each)
#   PYTHONPATH=$$PWD/.gpu/site:$$PWD MUJOCO_GL=egl make gpu-check PY=python3 ARGS="out_dir=outputs/gpu_check"
gpu-check: $(if $(filter $(VENV)/bin/python,$(PY)),install)
	@MUJOCO_GL=$${MUJOCO_GL:-egl} $(PY) scripts/gpu_check.py $(ARGS)

gpu-check-paper: $(if $(filter $(VENV)/bin/python,$(PY)),install)
	@MUJOCO_GL=$${MUJOCO_GL:-egl} $(PY) scripts/gpu_check.py stages=[paper] paper_s=540 $(ARGS)

clean:
	rm -rf $(VENV) outputs .pytest_cache
