"""What a trained policy expects: the one description that travels with its weights.

A ``PolicySpec`` says which cameras the policy sees (in its order) and at which image size, the
statistics it normalises with, the task and render quality it was trained on, and the sizes of
its qpos, actions and chunks. Training builds it from the dataset (``act.training.run``), the
network completes it with its sizes (``NormalizedACT``); a checkpoint stores ``to_dict()`` as
``hyper_parameters["deployment"]``, an export as its JSON metadata (``act.runtime.export``); the
runtime, evaluation and resume read it back with ``from_dict``.

Files written before a field existed lack it: ``from_dict`` gives it the default declared here,
so old checkpoints and exports still load. A new field is one line here, plus where training sets it.
"""

from __future__ import annotations

import numbers
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Mapping

from act.common.checks import check_choice
from act.common.errors import InputError

STAT_KEYS = ("qpos_mean", "qpos_std", "action_mean", "action_std")
NETWORK_SIZES = ("chunk_size", "state_dim", "action_dim")


def _setting(name: str) -> dict:
    """A field's metadata: the config setting that chooses it, which a resumed run must repeat
    (the checkpoint's weights, or the data they were trained on, depend on it)."""
    return {"setting": name}


def _items(value) -> tuple | None:
    """``value``'s items as a tuple (a list, tuple, array or config list); None for a string or a scalar."""
    if isinstance(value, (str, bytes)):
        return None
    try:
        return tuple(value)
    except TypeError:
        return None


def _positive_int(value) -> bool:
    """Whether ``value`` is a whole number >= 1 (an int, a NumPy integer, 32.0; never a bool)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and value >= 1 and int(value) == value


@dataclass(frozen=True)
class PolicySpec:
    """What a trained policy expects, as plain values.

    Args:
        task: the simulated task it was trained on (evaluation's default), None for other data.
        camera_names: cameras in the order the network sees them.
        image_size: (H, W) of the camera images it takes.
        render_quality: how the training images were rendered ('paper', 'fast'; None: not simulated);
            evaluation renders the same way.
        stats: ``qpos_mean``/``qpos_std``/``action_mean``/``action_std`` (D,) per dimension, or None
            (identity: an untrained network).
        demonstrations: who performed the training demonstrations, as the dataset says: the simulated expert's
            name, then ``/`` and its choice where it has one (``scripted``, ``human_like/meeting``,
            ``human_like/planted``); None for data no expert of ours recorded (a real robot, older files).
        chunk_size, state_dim, action_dim: k, the qpos size and the action size; None until the
            network fills them in (``for_network``).

    Values are normalised when built: tuples for sequences, floats for the statistics.
    """

    task: str | None = field(default=None, metadata=_setting("task"))
    camera_names: tuple[str, ...] = field(default=("top",), metadata=_setting("task.cameras"))
    image_size: tuple[int, int] = field(default=(480, 640), metadata=_setting("task.image_size"))
    render_quality: str | None = None
    stats: dict[str, tuple[float, ...]] | None = None
    demonstrations: str | None = None
    chunk_size: int | None = None
    state_dim: int | None = None
    action_dim: int | None = None

    def __post_init__(self):
        for name in ("task", "render_quality", "demonstrations"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise InputError(f"policy spec: {name} must be a name or None, got {value!r}")
        cameras, size = _items(self.camera_names), _items(self.image_size)
        if not cameras or not all(isinstance(c, str) and c for c in cameras):
            raise InputError(
                f"policy spec: camera_names must be a non-empty list of camera names, got {self.camera_names!r}"
            )
        if size is None or len(size) != 2 or not all(_positive_int(v) for v in size):
            raise InputError(f"policy spec: image_size must be [height, width] in pixels, got {self.image_size!r}")
        for name in NETWORK_SIZES:
            value = getattr(self, name)
            if value is not None and not _positive_int(value):
                raise InputError(f"policy spec: {name} must be a positive integer, got {value!r}")
            object.__setattr__(self, name, None if value is None else int(value))
        if self.stats is not None and not isinstance(self.stats, Mapping):  # a list would fail below, unnamed
            raise InputError(f"policy spec: stats must map {', '.join(STAT_KEYS)} to values, got {self.stats!r:.80}")
        for key in self.stats or {}:
            check_choice("statistic", key, STAT_KEYS)
        object.__setattr__(self, "camera_names", cameras)
        object.__setattr__(self, "image_size", (int(size[0]), int(size[1])))
        if self.stats is not None:  # (D,) arrays, tensors or lists of a dataset -> plain floats
            object.__setattr__(self, "stats", {k: tuple(float(x) for x in v) for k, v in self.stats.items()})

    def to_dict(self) -> dict[str, Any]:
        """Plain values (lists, floats, strings, None): what checkpoints and exports store."""
        values = asdict(self)
        values["camera_names"], values["image_size"] = list(self.camera_names), list(self.image_size)
        if self.stats is not None:
            values["stats"] = {k: list(v) for k, v in self.stats.items()}
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None) -> PolicySpec:
        """The spec stored as ``values`` (``to_dict``'s, or an older file's): a key that is missing or
        None takes the default; an unknown key is refused (a misspelt field would otherwise pass)."""
        for key in values or {}:
            check_choice("policy spec field", key, cls.keys())
        return cls(**{k: v for k, v in (values or {}).items() if v is not None})

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The field names: the keys of ``to_dict`` (an export's metadata holds more beside them)."""
        return tuple(f.name for f in fields(cls))

    def for_network(self, chunk_size: int, state_dim: int, action_dim: int) -> PolicySpec:
        """This spec with a network's sizes; sizes it already holds must be the network's."""
        sizes = {"chunk_size": chunk_size, "state_dim": state_dim, "action_dim": action_dim}
        for name, value in sizes.items():
            held = getattr(self, name)
            if held is not None and held != value:
                raise InputError(f"the policy spec says {name}={held}, the network has {name}={value}")
        return replace(self, **sizes)

    def resume_pairs(self, now: PolicySpec) -> list[tuple[str, Any, Any]]:
        """(setting, this spec's value, ``now``'s value) for every field a config setting chooses: a run
        resumed from a checkpoint with this spec must not change them."""
        return [
            (f.metadata["setting"], getattr(self, f.name), getattr(now, f.name))
            for f in fields(self)
            if "setting" in f.metadata
        ]


class SpecFields:
    """Read-only views of ``self.spec`` (a completed ``PolicySpec``) for the objects that carry one: the
    normalised network and the runtime policy answer "what do you expect" the same way."""

    spec: PolicySpec

    @property
    def chunk_size(self) -> int:
        return self.spec.chunk_size

    @property
    def camera_names(self) -> list[str]:
        return list(self.spec.camera_names)

    @property
    def image_size(self) -> tuple[int, int]:
        return self.spec.image_size

    @property
    def state_dim(self) -> int:
        return self.spec.state_dim

    @property
    def task(self) -> str | None:
        return self.spec.task

    @property
    def render_quality(self) -> str | None:
        return self.spec.render_quality
