"""The prerequisite check (scripts/check_prereqs.py, run first by `make install`, `make test` and `make demo`):
each missing piece, simulated, gives one `error:` line naming the fix; this machine passes; macOS gets no EGL."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import ROOT

from act.common.gl import headless_backend
from act.common.prereqs import check_gl, check_python, check_venv, required_python

PYPROJECT = (ROOT / "pyproject.toml").read_text()


def libraries(*present):
    return lambda backend: backend in present


def test_this_machine_passes_silently():
    done = subprocess.run([sys.executable, "scripts/check_prereqs.py"], cwd=ROOT, capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_requires_python_is_read_from_pyproject():
    assert required_python('requires-python = ">=3.10, <3.14"\n') == [(">=", (3, 10)), ("<", (3, 14))]
    assert required_python(PYPROJECT), "pyproject.toml states no requires-python"


@pytest.mark.parametrize("version", [(3, 8, 18), (3, 9, 1)])
def test_an_old_python_is_one_line_naming_the_fix(version):
    errors = check_python(version, 'requires-python = ">=3.10"')
    assert len(errors) == 1
    shown = ".".join(map(str, version))
    assert errors[0].startswith(f"error: Python {shown} is not one pyproject.toml allows (>=3.10)")
    assert "PYTHON=" in errors[0]


def test_an_allowed_python_and_an_upper_bound():
    assert check_python((3, 11, 7), 'requires-python = ">=3.10"') == []
    assert check_python((3, 10, 0), 'requires-python = ">=3.10,<3.14"') == []
    assert len(check_python((3, 14, 0), 'requires-python = ">=3.10,<3.14"')) == 1


def test_a_python_without_ensurepip_names_python3_venv(tmp_path):
    # Debian's python3 without python3-venv: venv imports, ensurepip is gone
    errors = check_venv(tmp_path / ".venv", find_spec=lambda name: None if name == "ensurepip" else object())
    assert len(errors) == 1 and errors[0].startswith("error: ") and "apt install python3-venv" in errors[0]
    assert "ensurepip" in errors[0]


def test_an_existing_venv_needs_no_venv_module(tmp_path):
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").touch()
    assert check_venv(tmp_path / ".venv", find_spec=lambda name: None) == []


def test_no_egl_without_a_display_names_the_packages():
    errors = check_gl("linux", {}, libraries())
    assert len(errors) == 1
    assert errors[0].startswith("error: ") and "apt install libegl1 libgl1-mesa-dri" in errors[0]
    assert "MUJOCO_GL=osmesa" in errors[0]


def test_osmesa_alone_is_chosen_and_passes():
    assert headless_backend("linux", {}, libraries("osmesa")) == "osmesa"
    assert check_gl("linux", {}, libraries("osmesa")) == []


def test_a_chosen_backend_without_its_library_names_it():
    errors = check_gl("linux", {"MUJOCO_GL": "osmesa"}, libraries("egl"))
    assert errors == [
        "error: MUJOCO_GL=osmesa but its library is not installed: apt install libosmesa6 (Debian/Ubuntu), or unset it"
    ]


@pytest.mark.parametrize(
    "platform, environ",
    [("darwin", {}), ("linux", {"DISPLAY": ":0"}), ("linux", {"MUJOCO_GL": "glfw"})],
    ids=["macos", "a-display", "glfw-chosen"],
)
def test_no_egl_is_forced_where_there_is_a_display(platform, environ):
    assert headless_backend(platform, environ, libraries("egl", "osmesa")) is None
    assert check_gl(platform, environ, libraries()) == []


def test_egl_first_without_a_display():
    assert headless_backend("linux", {}, libraries("egl", "osmesa")) == "egl"
    assert headless_backend("linux", {"DISPLAY": ""}, libraries("egl")) == "egl"
