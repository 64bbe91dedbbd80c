"""The layer rule (issue 31): the library below ``act/apps`` reads no Hydra config, imports only its own layer or
the ones beneath it, and names each public thing once; the runtime, which goes onto a robot computer, needs
neither Lightning nor Hydra."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from helpers import ROOT

ACT = ROOT / "act"
# Lowest first: a module may import its own layer and the ones before it, never a later one.
LAYERS = ("common", "envs", "data", "model", "runtime", "eval", "training", "pipeline", "bench", "apps")
CONFIG_PACKAGES = ("hydra", "omegaconf")


def modules() -> dict[str, Path]:
    """``act.x.y`` -> its file, for every module of the package."""
    found = {}
    for path in sorted(ACT.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in ``path``, those inside functions and ``TYPE_CHECKING`` blocks included:
    a deferred import is still a dependency."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[0] == "act" and parts[1] in LAYERS else None


def test_every_package_of_act_has_a_layer():
    packages = {p.name for p in ACT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages == set(LAYERS), f"give these a place in LAYERS: {packages ^ set(LAYERS)}"


def test_only_the_apps_read_hydra_configs():
    offenders = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for module, path in modules().items()
        if layer_of(module) != LAYERS.index("apps")
        for line, name in imported(path)
        if name.split(".")[0] in CONFIG_PACKAGES
    ]
    assert not offenders, "hydra/omegaconf below act/apps:\n" + "\n".join(offenders)


def test_imports_go_down_the_layers_never_up():
    offenders = []
    for module, path in modules().items():
        own = layer_of(module)
        for line, name in imported(path):
            target = layer_of(name)
            if own is not None and target is not None and target > own:
                offenders.append(f"{path.relative_to(ROOT)}:{line} ({LAYERS[own]}) imports {name} ({LAYERS[target]})")
    assert not offenders, "imports from a higher layer:\n" + "\n".join(offenders)


def test_each_public_name_is_defined_once_in_the_library():
    # Two `evaluate`s of different signatures once caused a TypeError (a3571d9). Apps all call theirs `main`.
    where = defaultdict(list)
    for module, path in modules().items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                if not (node.name == "main" and layer_of(module) == LAYERS.index("apps")):
                    where[node.name].append(module)
    twins = {name: places for name, places in where.items() if len(places) > 1}
    assert not twins, f"public names defined in more than one module: {twins}"


# act/apps/*.py are the commands; adapters/ (Hydra configs to the library's objects), cli.py (the one wrapper
# every script calls) and hydra_errors.py (its error lines) serve them all and are no command.
NOT_COMMANDS = ("act.apps", "act.apps.cli", "act.apps.hydra_errors")


def test_no_command_imports_another_and_none_changes_its_config_in_place():
    """What two commands share lives in act/apps/adapters/ or below, never in another command (issue 50); a config
    is read, never changed in place: workflows merge what they choose into a new config."""
    commands = {m for m in modules() if m.count(".") == 2 and m.startswith("act.apps.") and m not in NOT_COMMANDS}
    offenders = [
        f"{modules()[module].relative_to(ROOT)}:{line} imports {name}"
        for module in commands
        for line, name in imported(modules()[module])
        if name in commands
    ]
    assert not offenders, "commands importing commands:\n" + "\n".join(offenders)
    in_place = [
        f"{path.relative_to(ROOT)}:{number}"
        for module, path in modules().items()
        if module.startswith("act.apps")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "open_dict" in line
    ]
    assert not in_place, "open_dict in act/apps:\n" + "\n".join(in_place)


def test_no_function_of_the_library_is_longer_than_80_lines():
    long = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path in modules().values()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 80
    ]
    assert not long, "split these:\n" + "\n".join(long)


APPS_MOST_LINES, APP_MOST_LINES = 2000, 150


def test_the_commands_stay_adapters():
    """Issue 69: act/apps turns Hydra configs into typed settings and calls the library; the workflows live below
    it. So the command layer stays small: at most 2,000 lines in all and 150 in any one module."""
    sizes = {path.relative_to(ROOT): len(path.read_text().splitlines()) for path in (ACT / "apps").rglob("*.py")}
    large = {str(path): n for path, n in sizes.items() if n > APP_MOST_LINES}
    assert not large, f"over {APP_MOST_LINES} lines in act/apps (move the workflow below act/apps): {large}"
    assert sum(sizes.values()) <= APPS_MOST_LINES, f"act/apps holds {sum(sizes.values())} lines"
