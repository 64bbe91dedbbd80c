"""The ACT policy at run time: observation checks, chunked execution, temporal ensembling.

``ACTPolicy.select_action(observation)`` is called once per 50 Hz control step. In chunked
mode it queries the network every ``n_action_steps`` steps and plays the chunk in order; with
temporal ensembling it queries every step and averages every stored prediction for the current
step with weights exp(-m * i), i = 0 the oldest (the paper's scheme).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import torch

from act.lit_module import ACTLitModule
from act.precision import autocast, resolve_precision


class TemporalEnsembler:
    """Online temporal ensembling with memory bounded by the chunk size.

    For target step t the predictions come from the queries at t-k+1 .. t (oldest first); the
    i-th oldest gets weight exp(-coeff * i). Instead of storing every chunk, it keeps for each of
    the next k steps the running weighted mean and how many predictions it holds, so adding a
    newer prediction is mean <- (mean * W_n + w_n * a) / W_{n+1} with W_n = sum_{i<n} w_i.

    Args:
        coeff: m >= 0; 0 averages uniformly, larger m trusts the oldest prediction more.
        chunk_size: k, the length of every chunk passed to ``update``.
    """

    def __init__(self, coeff: float, chunk_size: int):
        if coeff < 0:
            raise ValueError(f"temporal_ensemble_coeff must be >= 0, got {coeff}")
        self.coeff, self.chunk_size = float(coeff), int(chunk_size)
        self.weights = np.exp(-self.coeff * np.arange(self.chunk_size))  # (k,), w_0 for the oldest
        self.cum_weights = np.concatenate([[0.0], np.cumsum(self.weights)])  # (k + 1,), W_0 = 0
        self.reset()

    def reset(self) -> None:
        self.mean: np.ndarray | None = None  # (n <= k, A): running means for steps t, t+1, ...
        self.count = np.zeros(0, dtype=np.int64)  # (n,): predictions held for each step

    def update(self, chunk: np.ndarray) -> np.ndarray:
        """Add the chunk predicted at the current step (k, A); return the action for this step (A,)."""
        chunk = np.asarray(chunk, dtype=np.float64)
        if chunk.ndim != 2 or len(chunk) != self.chunk_size:
            raise ValueError(f"expected a chunk of shape ({self.chunk_size}, A), got {chunk.shape}")
        held = len(self.count)  # steps already predicted by earlier queries
        mean, count = np.zeros_like(chunk), np.zeros(self.chunk_size, dtype=np.int64)  # (k, A), (k,)
        if held:
            mean[:held], count[:held] = self.mean, self.count
        w_new = self.weights[count][:, None]  # (k, 1): the new prediction is the newest of each step
        mean = (mean * self.cum_weights[count][:, None] + w_new * chunk) / self.cum_weights[count + 1][:, None]
        count = count + 1
        action = mean[0]
        self.mean, self.count = mean[1:], count[1:]  # drop the step just played
        return action

    def advance(self) -> np.ndarray:
        """The action for a step with no new query: the running mean of the predictions already
        held for it (queries every n steps, n <= k, always leave some)."""
        if self.mean is None or not len(self.count):
            raise ValueError("no prediction covers this step: update() at least once every chunk_size steps")
        action = self.mean[0]
        self.mean, self.count = self.mean[1:], self.count[1:]
        return action


class ACTPolicy:
    """A trained ACT, ready for closed-loop control.

    Args:
        module: a trained ``ACTLitModule`` (its stats, cameras and image size come with it).
        n_action_steps: query every this many steps (1..chunk_size). Alone: chunked execution,
            the chunk played open-loop (default: the whole chunk).
        temporal_ensemble_coeff: temporal ensembling with this m. It queries every step, or every
            ``n_action_steps`` steps if that is given too (each step then averages the overlapping
            predictions of the queries so far: about n times fewer network calls).
        device: torch device for the network.
        precision: 'auto' (bf16-mixed where the device runs bf16 natively, else 32-true; see
            ``act.precision``), '32-true' or 'bf16-mixed' (autocast; about 1.8x faster on CPUs
            with native bf16, hundreds of times slower where it is emulated).
    """

    def __init__(self, module: ACTLitModule, n_action_steps: int | None = None,
                 temporal_ensemble_coeff: float | None = None, device: str | torch.device = "cpu",
                 precision: str = "auto"):
        self.module = module.to(device).eval()
        self.device = torch.device(device)
        self.chunk_size = module.config.chunk_size
        self.camera_names = list(module.camera_names)
        self.image_size = tuple(module.image_size)
        self.state_dim = module.config.state_dim
        self.precision_choice = resolve_precision(precision, self.device)
        self.precision = self.precision_choice.precision
        self.temporal_ensemble_coeff = None
        if temporal_ensemble_coeff is not None:
            TemporalEnsembler(temporal_ensemble_coeff, self.chunk_size)  # checks the coefficient
            self.temporal_ensemble_coeff = float(temporal_ensemble_coeff)
        default = 1 if temporal_ensemble_coeff is not None else self.chunk_size
        n = default if n_action_steps is None else int(n_action_steps)
        if not 1 <= n <= self.chunk_size:
            raise ValueError(f"n_action_steps must be in 1..chunk_size={self.chunk_size}, got {n_action_steps}")
        self.n_action_steps = n
        self.queries = 0
        self.reset()

    @classmethod
    def from_checkpoint(cls, path: str | Path, device: str | torch.device = "cpu", **kwargs) -> "ACTPolicy":
        """Rebuild the policy from a training checkpoint alone (see ``ACTLitModule``)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"checkpoint {path} does not exist")
        module = ACTLitModule.load_from_checkpoint(path, map_location=torch.device(device))
        return cls(module, device=device, **kwargs)

    @property
    def task(self) -> str | None:
        return self.module.hparams.get("task")

    @property
    def execution(self) -> str:
        if self.temporal_ensemble_coeff is not None:
            every = f", a query every {self.n_action_steps} steps" if self.n_action_steps > 1 else ""
            return f"temporal ensembling, m={self.temporal_ensemble_coeff:g}{every}"
        return f"chunked, n_action_steps={self.n_action_steps}"

    def reset(self, num_envs: int = 1) -> None:
        """Forget the previous episodes (call before each); ``num_envs`` episodes run side by side."""
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.num_envs = int(num_envs)
        self._queues: list[list[np.ndarray]] = [[] for _ in range(self.num_envs)]
        self._steps = [0] * self.num_envs  # control steps played in each episode
        self._ensemblers = None
        if self.temporal_ensemble_coeff is not None:
            self._ensemblers = [TemporalEnsembler(self.temporal_ensemble_coeff, self.chunk_size)
                                for _ in range(self.num_envs)]

    def check_observation(self, observation: Mapping) -> None:
        """Raise ``ValueError`` naming what does not match the policy's training setup."""
        qpos = np.asarray(observation.get("qpos", ()))
        if qpos.shape != (self.state_dim,):
            raise ValueError(f"observation['qpos'] must have shape ({self.state_dim},), got {qpos.shape}")
        if not np.all(np.isfinite(qpos)):
            raise ValueError("observation['qpos'] contains NaN or inf")
        images = observation.get("images") or {}
        missing = [c for c in self.camera_names if c not in images]
        if missing:
            raise ValueError(f"observation lacks camera(s) {missing}; the policy was trained on {self.camera_names}, "
                             f"the observation has {sorted(images)}")
        for cam in self.camera_names:
            image = images[cam]
            if image.shape != (*self.image_size, 3) or image.dtype != np.uint8:
                raise ValueError(f"camera {cam!r} image must be {self.image_size[0]}x{self.image_size[1]}x3 uint8 "
                                 f"(as in training), got {image.shape} {image.dtype}")

    def _autocast(self):
        return autocast(self.precision, self.device.type)

    @torch.no_grad()
    def predict_chunk(self, observation: Mapping) -> np.ndarray:
        """One network query: (chunk_size, action_dim) raw actions for this observation."""
        self.check_observation(observation)
        qpos = torch.as_tensor(np.asarray(observation["qpos"], dtype=np.float32), device=self.device)[None]  # (1, D)
        frames = np.stack([observation["images"][cam] for cam in self.camera_names])  # (C, H, W, 3)
        images = torch.from_numpy(frames).to(self.device).permute(0, 3, 1, 2)[None]  # (1, C, 3, H, W)
        with self._autocast():
            chunk = self.module.predict_chunk(qpos, images)  # (1, k, A)
        self.queries += 1
        return chunk[0].float().cpu().numpy()

    @torch.no_grad()
    def predict_chunks(self, observations: Sequence[Mapping]) -> np.ndarray:
        """One batched network query: (N, chunk_size, action_dim) raw actions for N observations."""
        if len(observations) == 1:
            return self.predict_chunk(observations[0])[None]
        for observation in observations:
            self.check_observation(observation)
        qpos = torch.as_tensor(np.stack([np.asarray(o["qpos"], dtype=np.float32) for o in observations]),
                               device=self.device)  # (N, D)
        frames = np.stack([np.stack([o["images"][cam] for cam in self.camera_names])
                           for o in observations])  # (N, C, H, W, 3)
        images = torch.from_numpy(frames).to(self.device).permute(0, 1, 4, 2, 3)  # (N, C, 3, H, W)
        with self._autocast():
            chunks = self.module.predict_chunk(qpos, images)  # (N, k, A)
        self.queries += 1
        return chunks.float().cpu().numpy()

    def select_actions(self, observations: Sequence[Mapping | None]) -> list[np.ndarray | None]:
        """The joint commands of ``num_envs`` episodes run side by side (see ``reset``), with one
        batched network query for all that need one. ``None`` marks a finished episode (gets ``None``)."""
        if len(observations) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} observations (reset(num_envs)), got {len(observations)}")
        live = [i for i, o in enumerate(observations) if o is not None]
        if self._ensemblers is not None:
            need = [i for i in live if self._steps[i] % self.n_action_steps == 0]
        else:
            need = [i for i in live if not self._queues[i]]
        queried = set(need)
        for i in set(live) - queried:
            self.check_observation(observations[i])
        actions: list[np.ndarray | None] = [None] * self.num_envs
        if need:
            chunks = self.predict_chunks([observations[i] for i in need])
            for i, chunk in zip(need, chunks):
                if self._ensemblers is not None:
                    actions[i] = self._ensemblers[i].update(chunk).astype(np.float64)
                else:
                    self._queues[i] = list(chunk[: self.n_action_steps])
        for i in live:
            if self._ensemblers is None:
                actions[i] = np.asarray(self._queues[i].pop(0), dtype=np.float64)
            elif i not in queried:
                actions[i] = self._ensemblers[i].advance().astype(np.float64)
            self._steps[i] += 1
        return actions

    def select_action(self, observation: Mapping) -> np.ndarray:
        """The (action_dim,) joint command for this control step (one episode: ``reset()``)."""
        if self.num_envs != 1:
            raise ValueError(f"the policy runs {self.num_envs} episodes (reset(num_envs)); use select_actions")
        return self.select_actions([observation])[0]
