"""The one check of a name against its valid choices, with the message that lists them."""

from __future__ import annotations

from typing import Any, Collection

from act.common.errors import InputError


def check_choice(kind: str, value: Any, valid: Collection, note: str = "") -> None:
    """Raise ``ValueError("unknown <kind> <value>; valid: a, b<note>")`` unless ``value`` is in ``valid``
    (for arguments of the Python API: ``kind`` names the thing, e.g. "camera")."""
    if value not in valid:
        raise InputError(f"unknown {kind} {value!r}; valid: {', '.join(map(str, valid))}{note}")


def check_setting(key: str, value: Any, valid: Collection, note: str = "") -> None:
    """Raise ``ValueError("<key>=<value> is unknown; valid: a, b<note>")`` unless ``value`` is in
    ``valid`` (for config settings: ``key`` is what the user typed, e.g. "env.backend")."""
    if value not in valid:
        raise InputError(f"{key}={value!r} is unknown; valid: {', '.join(map(str, valid))}{note}")


def is_integer(value: Any, whole_floats: bool = False) -> bool:
    """An int that is not a bool (YAML's ``true`` must not pass as 1); with ``whole_floats``, 4.0 counts too
    (a value Hydra or a JSON file gave as a float)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (whole_floats and isinstance(value, float) and value.is_integer())


def is_number(value: Any) -> bool:
    """An int or float that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
