"""Shared fixtures: small images and explicit seeds keep every test fast and repeatable."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")


@pytest.fixture
def run_script(tmp_path):
    """Run ``scripts/<name>.py`` with Hydra overrides in a subprocess; return the CompletedProcess."""
    import subprocess

    def run(name: str, *overrides: str, check: bool = True):
        proc = subprocess.run([sys.executable, str(ROOT / "scripts" / f"{name}.py"), *overrides],
                              cwd=tmp_path, capture_output=True, text=True, timeout=900)
        if check and proc.returncode != 0:
            raise AssertionError(f"{name} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    return run
