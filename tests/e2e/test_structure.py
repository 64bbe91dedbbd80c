"""The layout and the entry points' contract: thin scripts, one error wrapper, quiet output, the sweeper's metric."""

from __future__ import annotations

import ast
import csv
import re

import pytest

from common.cli import run_main
from common.errors import InputError, RunStopped
from helpers import ROOT, tiny_overrides


def test_scripts_are_thin_and_tests_never_import_them():
    long = {p.name: n for p in (ROOT / "scripts").glob("*.py") if (n := len(p.read_text().splitlines())) > 60}
    assert not long, f"scripts over 60 lines: {long}"
    for path in (ROOT / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n == "scripts" or n.startswith("scripts.") for n in names), f"{path.name} imports {names}"
    assert sorted(p.name for p in (ROOT / "act").glob("*.py")) == ["__init__.py"]


def test_the_wrapper_prints_user_errors_as_one_line_and_keeps_bugs_tracebacks(capsys):
    def bad_setting():
        raise InputError("num_episodes must be positive, got 0")

    with pytest.raises(SystemExit) as info:
        run_main(bad_setting)
    assert info.value.code == 2 and capsys.readouterr().err == "error: num_episodes must be positive, got 0\n"

    def stopped():
        raise RunStopped("episode 0 after 3 ticks", 1)

    with pytest.raises(SystemExit) as info:
        run_main(stopped)
    assert info.value.code == 1 and capsys.readouterr().err == "stopped: episode 0 after 3 ticks\n"

    def interrupted():
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as info:
        run_main(interrupted, interrupted="interrupted: rerun to resume")
    assert info.value.code == 130 and capsys.readouterr().err == "interrupted: rerun to resume\n"

    def bug():
        raise ValueError("a programming error")  # a plain ValueError is not the user's: it keeps its traceback

    with pytest.raises(ValueError, match="a programming error"):
        run_main(bug)
    assert run_main(lambda x: x + 1, 41) == 42


def test_the_sweeper_gets_the_optimized_metric_and_lightning_speaks_once(run_script, demos, tmp_path):
    out = tmp_path / "run"
    proc = run_script("train", *tiny_overrides(demos, out, "trainer.max_steps=20", "optimized_metric=val/loss"))
    with open(out / "csv" / "metrics.csv") as f:
        logged = [float(row["val/loss"]) for row in csv.DictReader(f) if row.get("val/loss")]
        f.seek(0)
        l1 = [float(row["val/l1"]) for row in csv.DictReader(f) if row.get("val/l1")]
    assert len(logged) == 2 and len(l1) == 2
    value = float(re.search(r"^done: val/loss (\S+) \|", proc.stdout, re.M).group(1))
    # No checkpoint ranks by val/loss: the sweeper gets its last value, not the best val/l1.
    assert value == pytest.approx(logged[-1], rel=1e-6) and value != pytest.approx(min(l1), rel=1e-6)
    both = proc.stdout + proc.stderr
    assert both.count("GPU available:") == 1, both[-3000:]  # once, not as a plain INFO: line and a Hydra one
    assert "Tip:" not in both and "litlogger" not in both
