"""The runtime stands without the training stack: a robot computer needs no Hydra, OmegaConf or Lightning,
and the runtime imports nothing of the layers above it (evaluation, training, the pipelines, the apps)."""

from __future__ import annotations

import subprocess
import sys

from helpers import ROOT

BLOCKED = ("hydra", "omegaconf", "lightning", "pytorch_lightning")
ABOVE = ("act.eval", "act.training", "act.pipeline", "act.bench", "act.apps")

CHECK = f"""
import importlib, pkgutil, sys

class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError(f"import of {{name}} halted")

sys.meta_path.insert(0, Blocker())
import act.runtime
for module in pkgutil.walk_packages(act.runtime.__path__, "act.runtime."):
    importlib.import_module(module.name)
print(" ".join(name for name in sys.modules if name.startswith({ABOVE!r})))
"""


def test_every_runtime_module_imports_without_hydra_omegaconf_lightning_or_a_higher_layer():
    # A robot computer runs act/runtime with torch alone (deployment included): issue 31's first finding.
    proc = subprocess.run([sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == [], f"the runtime imports higher layers: {proc.stdout}"
