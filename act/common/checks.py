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
