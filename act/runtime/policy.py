"""The ACT policy at run time: observation checks, and the scheduler that turns chunks into
one joint command per 50 Hz control tick.

``ACTPolicy.select_action(observation)`` is called once per control tick. Every execution mode
is one ``act.runtime.scheduler.ChunkScheduler``: chunked execution (a query every
``n_action_steps`` ticks, the chunk played open loop), temporal ensembling (every stored
prediction for the current tick averaged with weights exp(-m * i), i = 0 the oldest; the
paper's scheme), a crossfade between chunks, each synchronous or asynchronous. ``latency_ticks``
simulates a network that delivers d ticks after it was asked (simulated time, reproducible):
synchronous modes hold the last command while they wait, asynchronous ones keep playing the
plan and skip the actions whose tick has passed.

The network runs in any runtime (``act.runtime.predictors``): a training checkpoint read without
Lightning, a TorchScript or an ONNX export. This module imports neither Lightning nor Hydra.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import torch

from act.common.errors import InputError
from act.model.spec import PolicySpec, SpecFields
from act.runtime.device import resolve_device
from act.runtime.execution import ExecutionConfig
from act.runtime.predictors import EagerPredictor, load_predictor
from act.runtime.scheduler import ChunkScheduler


def _as_predictor(network, device, precision):
    """A predictor for a ``NormalizedACT``, a module holding one as ``.net`` (``ACTLitModule``), or a
    predictor already (not a module: anything with a ``spec`` and a call)."""
    if not isinstance(network, torch.nn.Module) and hasattr(network, "spec") and callable(network):
        return network
    net = getattr(network, "policy_net", None) or getattr(network, "net", network)  # the weight average, if kept
    if not isinstance(getattr(net, "spec", None), PolicySpec):
        raise TypeError(
            f"ACTPolicy needs a NormalizedACT, an ACTLitModule or a predictor, got {type(network).__name__}"
        )
    return EagerPredictor(net, device, precision)


class ACTPolicy(SpecFields):
    """A trained ACT, ready for closed-loop control.

    Args:
        network: a ``NormalizedACT``, an ``ACTLitModule`` (its ``net``) or a predictor from
            ``act.runtime.predictors`` (e.g. an ONNX export).
        n_action_steps: query every this many ticks (1..chunk_size). Alone: chunked execution,
            the first n actions of each chunk played open loop (default: the whole chunk).
        temporal_ensemble_coeff: temporal ensembling with this m. It queries every tick, or every
            ``n_action_steps`` ticks if that is given too (each tick then averages the overlapping
            predictions of the queries so far: about n times fewer network calls).
        device: where an eager network runs: ``cpu``, ``cuda[:i]`` or ``auto`` (CUDA where present).
        precision: 'auto' (bf16-mixed where the device runs bf16 natively, else 32-true; see
            ``act.runtime.precision``), '32-true' or 'bf16-mixed'; exported networks run in fp32.
        blend: how a new chunk merges with the plan: ``replace``, ``ensemble`` or ``crossfade``
            (default: ``ensemble`` with a coefficient, else ``replace``).
        crossfade_steps: ramp of the crossfade in ticks (default: the whole overlap).
        queue_threshold: query when this many planned actions are left (default: every n ticks).
        asynchronous: keep playing the plan while a query is in flight (else wait, holding).
        latency_ticks: d, the ticks a query takes to deliver (0: immediately, as in the paper).
        latent: the CVAE's z: ``zero`` (the paper) or ``sample``: one z ~ N(0, I) per episode, drawn from the
            episode's seed where ``reset`` is given seeds (else from the policy's own generator) and held for the
            whole episode. Needs an eager network (a checkpoint); a network trained without the CVAE ignores it.

    The execution arguments are the fields of ``act.runtime.execution.ExecutionConfig`` (kept as
    ``settings``), which checks them: a config's policy is ``ACTPolicy(network, **asdict(settings))``.
    What it expects is its predictor's ``spec`` (``act.model.spec.PolicySpec``); ``chunk_size``,
    ``camera_names``, ``image_size``, ``state_dim``, ``task`` and ``render_quality`` read it.
    """

    def __init__(
        self,
        network,
        n_action_steps: int | None = None,
        temporal_ensemble_coeff: float | None = None,
        device: str | torch.device = "cpu",
        precision: str = "auto",
        *,
        blend: str | None = None,
        crossfade_steps: int | None = None,
        queue_threshold: int | None = None,
        asynchronous: bool = False,
        latency_ticks: int = 0,
        latent: str = "zero",
    ):
        self.settings = ExecutionConfig(
            temporal_ensemble_coeff=temporal_ensemble_coeff,
            n_action_steps=n_action_steps,
            blend=blend,
            asynchronous=asynchronous,
            queue_threshold=queue_threshold,
            crossfade_steps=crossfade_steps,
            precision=precision,
            latency_ticks=latency_ticks,
            latent=latent,
        )  # checked before the network is touched
        self.predictor = _as_predictor(network, device, precision)
        if latent == "sample" and not hasattr(self.predictor, "latent_dim"):
            raise InputError(
                f"execution.latent=sample needs the training checkpoint (.ckpt): a {self.predictor.format} "
                "network decodes with z = 0 only"
            )
        # z per episode where the network has a CVAE to read it; without one z was always 0 in training.
        self.latent_dim = getattr(self.predictor, "latent_dim", None) if latent == "sample" else None
        self._rng = np.random.default_rng()
        self.device = getattr(self.predictor, "device", None) or resolve_device(device)
        self.spec: PolicySpec = self.predictor.spec  # what it expects: cameras, image size, sizes, task
        self.precision = self.predictor.precision
        self.precision_choice = getattr(self.predictor, "precision_choice", None)
        self.schedule = self.settings.schedule(self.chunk_size)  # n_action_steps and queue_threshold checked against k
        self.temporal_ensemble_coeff = self.settings.temporal_ensemble_coeff
        self.n_action_steps, self.blend = self.schedule.n_action_steps, self.schedule.blend
        self.latency_ticks = self.settings.latency_ticks
        self.asynchronous = self.settings.asynchronous
        self.queries = 0
        self.reset()

    @classmethod
    def load(cls, path: str | Path, device: str | torch.device = "cpu", **kwargs) -> "ACTPolicy":
        """The policy of a training checkpoint (``.ckpt``, read without Lightning) or an exported artifact
        (``.pt``, ``.onnx``), on ``device`` (``policy_device``); ``kwargs``: the execution arguments.
        An unknown file type is refused before anything is read, a missing file by name."""
        precision = kwargs.pop("precision", "auto")
        return cls(load_predictor(path, device, precision), device=device, precision=precision, **kwargs)

    @property
    def latent(self) -> str:
        """What z the network decodes with: ``zero``, ``sample`` (one draw per episode), or ``zero (no CVAE)``
        where ``sample`` was asked of a network trained without the CVAE."""
        if self.settings.latent == "sample" and self.latent_dim is None:
            return "zero (no CVAE)"
        return self.settings.latent

    @property
    def execution(self) -> str:
        timing = "asynchronous" if self.asynchronous else "synchronous"
        latency = f", latency {self.latency_ticks} ticks" if self.latency_ticks else ""
        if self.blend == "ensemble":
            every = f", a query every {self.n_action_steps} steps" if self.n_action_steps > 1 else ""
            mode = f"temporal ensembling, m={self.temporal_ensemble_coeff:g}{every}"
        elif self.blend == "crossfade":
            mode = f"crossfade, queue threshold {self.schedule.threshold}"
        else:
            mode = f"chunked, n_action_steps={self.n_action_steps}"
        if self.asynchronous and self.blend != "crossfade":
            mode += f", queue threshold {self.schedule.threshold}"
        if self.latent_dim is not None:
            mode += ", z sampled per episode"
        return mode if (not self.asynchronous and not self.latency_ticks) else f"{mode} ({timing}{latency})"

    def new_scheduler(self) -> ChunkScheduler:
        """A scheduler with this policy's execution settings (one per episode)."""
        return self.settings.scheduler(self.chunk_size)

    def reset(self, num_envs: int = 1, seeds: Sequence[int] | None = None) -> None:
        """Forget the previous episodes (call before each); ``num_envs`` episodes run side by side, ``seeds``
        their seeds (with ``latent=sample``, each episode's z is drawn from its seed)."""
        if num_envs < 1:
            raise InputError(f"num_envs must be >= 1, got {num_envs}")
        if seeds is not None and len(seeds) != num_envs:
            raise InputError(f"need one seed per episode, got {len(seeds)} for {num_envs}")
        self.num_envs = int(num_envs)
        self._latents = None
        if self.latent_dim is not None:
            draws = [None] * self.num_envs if seeds is None else [int(s) for s in seeds]
            self._latents = np.stack([episode_latent(self.latent_dim, seed, self._rng) for seed in draws])  # (N, L)
        self.schedulers = [self.new_scheduler() for _ in range(self.num_envs)]
        self._steps = [0] * self.num_envs  # control ticks played in each episode
        self._arrivals: list[tuple[int, np.ndarray] | None] = [None] * self.num_envs  # (tick, chunk) in flight
        self._last: list[np.ndarray | None] = [None] * self.num_envs  # the last command sent
        self.last_fresh: list[bool | None] = [None] * self.num_envs  # this tick's action came from the plan
        self.last_switch: list[bool] = [False] * self.num_envs  # ... and a newly arrived chunk shaped it

    def check_observation(self, observation: Mapping) -> None:
        """Raise ``ValueError`` naming what does not match the policy's training setup."""
        qpos = np.asarray(observation.get("qpos", ()))
        if qpos.shape != (self.state_dim,):
            raise InputError(f"observation['qpos'] must have shape ({self.state_dim},), got {qpos.shape}")
        if not np.all(np.isfinite(qpos)):
            raise InputError("observation['qpos'] contains NaN or inf")
        images = observation.get("images") or {}
        missing = [c for c in self.camera_names if c not in images]
        if missing:
            raise InputError(
                f"observation lacks camera(s) {missing}; the policy was trained on {self.camera_names}, "
                f"the observation has {sorted(images)}"
            )
        for cam in self.camera_names:
            image = images[cam]
            if image.shape != (*self.image_size, 3) or image.dtype != np.uint8:
                raise InputError(
                    f"camera {cam!r} image must be {self.image_size[0]}x{self.image_size[1]}x3 uint8 "
                    f"(as in training), got {image.shape} {image.dtype}"
                )

    def _inputs(self, observations: Sequence[Mapping]) -> tuple[np.ndarray, np.ndarray]:
        qpos = np.stack([np.asarray(o["qpos"], dtype=np.float32) for o in observations])  # (N, D)
        frames = np.stack(
            [np.stack([o["images"][cam] for cam in self.camera_names]) for o in observations]
        )  # (N, C, H, W, 3)
        return qpos, np.ascontiguousarray(frames.transpose(0, 1, 4, 2, 3))  # (N, C, 3, H, W)

    def warm_up(self, batch_sizes: Sequence[int] = (1,), repeats: int = 2) -> None:
        """Run the network ``repeats`` times per batch size on mid-grey observations, touching no
        episode state: call before anything is timed. The first queries pay one-off costs (CUDA
        context and kernel selection, cuDNN autotuning per input shape, oneDNN primitives) that
        would otherwise count as latency of the first control ticks."""
        h, w = self.image_size
        for batch in sorted(set(int(b) for b in batch_sizes)):
            qpos = np.zeros((batch, self.state_dim), dtype=np.float32)  # (N, D)
            images = np.full((batch, len(self.camera_names), 3, h, w), 128, dtype=np.uint8)  # (N, C, 3, H, W)
            for _ in range(repeats):
                self.predictor(qpos, images)

    def _predict(self, observations: Sequence[Mapping], episodes: Sequence[int]) -> np.ndarray:
        """(N, k, A) raw actions for the observations of ``episodes`` (indices of the episodes side by side),
        each decoded with its episode's z where ``latent=sample``."""
        if self._latents is None:
            return self.predictor(*self._inputs(observations))
        return self.predictor(*self._inputs(observations), latents=self._latents[list(episodes)])

    def predict_chunk(self, observation: Mapping, episode: int = 0) -> np.ndarray:
        """One network query: (chunk_size, action_dim) raw actions for this observation (of episode ``episode``)."""
        self.check_observation(observation)
        chunk = self._predict([observation], [episode])[0]  # (k, A)
        self.queries += 1
        return chunk

    def predict_chunks(self, observations: Sequence[Mapping], episodes: Sequence[int] | None = None) -> np.ndarray:
        """One batched network query: (N, chunk_size, action_dim) raw actions for N observations (of ``episodes``,
        default 0..N-1)."""
        episodes = list(range(len(observations))) if episodes is None else list(episodes)
        if len(observations) == 1:
            return self.predict_chunk(observations[0], episodes[0])[None]
        for observation in observations:
            self.check_observation(observation)
        chunks = self._predict(observations, episodes)  # (N, k, A)
        self.queries += 1
        return chunks

    def select_actions(self, observations: Sequence[Mapping | None]) -> list[np.ndarray | None]:
        """The joint commands of ``num_envs`` episodes run side by side (see ``reset``), with one
        batched network query for all that need one. ``None`` marks a finished episode (gets ``None``).

        Per episode and tick: a chunk whose latency has elapsed is delivered; if the scheduler asks,
        a query on this tick's observation starts (its chunk is computed now and delivered
        ``latency_ticks`` later, at once when 0); the action is the plan's, or the last command
        held when there is none (``last_fresh`` False).
        """
        if len(observations) != self.num_envs:
            raise InputError(f"expected {self.num_envs} observations (reset(num_envs)), got {len(observations)}")
        live = [i for i, o in enumerate(observations) if o is not None]
        for i in live:
            arrival = self._arrivals[i]
            if arrival is not None and self._steps[i] >= arrival[0]:
                self.schedulers[i].deliver(arrival[1])
                self._arrivals[i] = None
        need = [i for i in live if self.schedulers[i].wants_query()]
        for i in set(live) - set(need):
            self.check_observation(observations[i])
        if need:
            chunks = self.predict_chunks([observations[i] for i in need], need)  # (len(need), k, A)
            for i, chunk in zip(need, chunks):
                self.schedulers[i].issue()
                if self.latency_ticks == 0:
                    self.schedulers[i].deliver(chunk)
                else:
                    self._arrivals[i] = (self._steps[i] + self.latency_ticks, chunk)
        actions: list[np.ndarray | None] = [None] * self.num_envs
        for i in live:
            if self._last[i] is None:  # before any command: hold where the arm is
                self._last[i] = np.asarray(observations[i]["qpos"], dtype=np.float64).copy()
            action, switched = self.schedulers[i].next_action()
            self.last_fresh[i], self.last_switch[i] = action is not None, switched
            if action is not None:
                self._last[i] = np.asarray(action, dtype=np.float64)
            actions[i] = self._last[i].copy()
            self._steps[i] += 1
        return actions

    def select_action(self, observation: Mapping) -> np.ndarray:
        """The (action_dim,) joint command for this control tick (one episode: ``reset()``)."""
        if self.num_envs != 1:
            raise InputError(f"the policy runs {self.num_envs} episodes (reset(num_envs)); use select_actions")
        return self.select_actions([observation])[0]


def episode_latent(latent_dim: int, seed: int | None, rng: np.random.Generator | None = None) -> np.ndarray:
    """One z ~ N(0, I) of ``latent_dim`` for an episode: drawn from its ``seed`` alone (the same z whatever the
    batch it runs in), or from ``rng`` where no seed is given."""
    source = np.random.default_rng([seed, 44]) if seed is not None else (rng or np.random.default_rng())
    return source.standard_normal(latent_dim).astype(np.float32)
