# Everything runs inside a project-local virtual environment (.venv), created on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
OUT ?= outputs/demo

.PHONY: install test test-slow demo bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

test: install
	$(PY) -m pytest -q -m "not slow"

test-slow: install
	$(PY) -m pytest -q -m slow

# The main job. For now: the scripted experts on a few seeds of each task, with a video.
demo: install
	$(PY) scripts/scripted_rollout.py task=transfer_cube num_episodes=5 num_videos=1 out_dir=$(OUT)/transfer_cube
	$(PY) scripts/scripted_rollout.py task=insertion num_episodes=5 num_videos=1 out_dir=$(OUT)/insertion

bench: install
	$(PY) scripts/bench_env.py out_dir=outputs/bench_env

clean:
	rm -rf $(VENV) outputs .pytest_cache
