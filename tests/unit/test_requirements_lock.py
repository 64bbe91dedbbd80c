"""requirements/lock.txt, what `make install` installs (issue 68): it pins every requirement pyproject.toml names
(the dependencies and the dev extra) within pyproject's range on each Python the project is tested on, every pin
carries hashes, and the environment running these tests is the lock's. A dependency added to pyproject.toml without
`make lock` fails here, not as an ImportError on a newcomer's machine."""

from __future__ import annotations

import re
from importlib import metadata

import pytest
from helpers import ROOT
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

LOCK = ROOT / "requirements" / "lock.txt"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)(?: ; (.+?))? \\$")
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")
PYTHONS = ["3.10", "3.11", "3.12", "3.13"]  # docs/results.md, T2


def pins() -> list[tuple[str, str, Marker | None, int]]:
    """(name, version, marker, number of hashes) for each pin of the lock."""
    found, lines = [], LOCK.read_text().splitlines()
    for number, line in enumerate(lines):
        match = PIN.match(line)
        if match:
            hashes = 0
            for following in lines[number + 1 :]:
                if not following.startswith(" "):
                    break
                hashes += len(HASH.findall(following))
            marker = Marker(match[3]) if match[3] else None
            found.append((canonicalize_name(match[1]), match[2], marker, hashes))
    return found


def direct_requirements() -> list[Requirement]:
    """pyproject.toml's dependencies and its dev extra, the extras it names of the project itself expanded."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted, todo, seen = list(project["dependencies"]), ["dev"], set()
    while todo:
        extra = todo.pop()
        seen.add(extra)
        for line in extras[extra]:
            requirement = Requirement(line)
            if canonicalize_name(requirement.name) == canonicalize_name(project["name"]):
                todo += [name for name in requirement.extras if name not in seen]
            else:
                wanted.append(line)
    return [Requirement(line) for line in wanted]


def environment(python: str) -> dict[str, str]:
    return {
        "python_version": python,
        "python_full_version": python + ".0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "implementation_name": "cpython",
    }


@pytest.mark.parametrize("python", PYTHONS)
def test_the_lock_pins_each_requirement_of_pyproject(python):
    env = environment(python)
    applying = [(name, version) for name, version, marker, _ in pins() if marker is None or marker.evaluate(env)]
    for requirement in direct_requirements():
        if requirement.marker and not requirement.marker.evaluate(env):
            continue
        versions = [version for name, version in applying if name == canonicalize_name(requirement.name)]
        assert len(versions) == 1, f"Python {python}: {requirement.name} pinned {versions}: run make lock"
        assert requirement.specifier.contains(versions[0], prereleases=True), (
            f"Python {python}: {requirement.name}=={versions[0]} is outside pyproject's {requirement}: run make lock"
        )


def test_every_pin_is_hashed_and_one_per_python():
    found = pins()
    assert len(found) > 100 and all(hashes for *_, hashes in found)
    for python in PYTHONS:
        names = [name for name, _, marker, _ in found if marker is None or marker.evaluate(environment(python))]
        assert len(names) == len(set(names)), f"Python {python}: a package pinned twice"


def test_this_environment_is_the_lock():
    """make install installed the lock: each pin that applies here is the installed version."""
    differ = []
    for name, version, marker, _ in pins():
        if marker is None or marker.evaluate():
            try:
                installed = metadata.version(name)
            except metadata.PackageNotFoundError:
                installed = None
            if installed != version:
                differ.append(f"{name}: locked {version}, installed {installed}")
    assert not differ, "not the lock's environment (make install):\n" + "\n".join(differ)
