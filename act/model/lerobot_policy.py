"""LeRobot ACT policies as our network, and ours as theirs: the ``pretrained_model/`` folder both ways.

A LeRobot 0.6 policy folder holds ``config.json`` (``"type": "act"``, its features and sizes), ``model.safetensors``
(``ACTPolicy``'s weights under ``model.``) and its normalisation statistics: in
``policy_preprocessor*.safetensors`` / ``policy_postprocessor*.safetensors`` (LeRobot >= PR #1452), or in older
checkpoints as ``normalize_inputs.*`` / ``unnormalize_outputs.*`` buffers beside the weights. Both networks are
the paper's ACT, and they agree layer for layer (LeRobot's ``modeling_act.py`` read against ``act/model``):

- the same post-norm transformer (``pre_norm=false``): encoder without a final norm, decoder with one, every
  decoder layer applied (both), ReLU feed-forward; ``nn.MultiheadAttention``'s packed ``in_proj`` is our
  q/k/v projections stacked in that order;
- the same tokens: [z, qpos, camera 1's h*w features, camera 2's ...], learned positions for the first two,
  DETR's normalised 2D sine positions (y channels first) for every camera's grid, z = 0 at inference;
- the same ResNet-18 with FrozenBatchNorm (eps 1e-5), its layer4 features through a 1x1 projection;
- the same normalisation, written differently: LeRobot divides by ``std + 1e-8`` (images, state and action alike,
  in [0, 1] images) and un-normalises actions with ``std`` alone. Loading folds the 1e-8 into our divisors,
  exactly; images take the policy's own per-channel mean and std (ImageNet's for most policies).

What has no counterpart is refused with one line naming the field: ``pre_norm``, a dilated last stage,
GELU/GLU feed-forward, another ResNet, several observation steps, an environment-state input, min-max or
quantile normalisation, missing statistics (never silently identity). Ours: a GroupNorm backbone (a trained
BatchNorm one maps: in eval mode it is FrozenBatchNorm with its running averages), a layer3 backbone, an image
crop, and execution modes LeRobot lacks (crossfade; ensembling with a query every n > 1 ticks).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Mapping

import numpy as np
import torch

from act.common.errors import InputError
from act.common.io import write_json
from act.common.safetensors import SafetensorsError, read_safetensors, write_safetensors
from act.model.act import ACTConfig
from act.model.normalized import NormalizedACT
from act.model.spec import PolicySpec

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
STATE, ACTION, IMAGES = "observation.state", "action", "observation.images."
EPS = 1e-8  # LeRobot's normalizer: (x - mean) / (std + eps)
PREPROCESSOR, POSTPROCESSOR = "policy_preprocessor", "policy_postprocessor"
OURS = "aloha_act.json"  # what our spec holds beyond LeRobot's config (task, render quality); LeRobot ignores it
# gym-aloha's task ids (a LeRobot training run's train_config.json) -> our tasks
GYM_TASKS = {"AlohaInsertion-v0": "insertion", "AlohaTransferCube-v0": "transfer_cube"}
# What must hold in a LeRobot ACT config for our network to be theirs: (field, the value we run, why).
REQUIRED = (
    ("vision_backbone", "resnet18", "our backbone is ResNet-18"),
    ("replace_final_stride_with_dilation", False, "our ResNet keeps the last stride (no dilated layer4)"),
    ("pre_norm", False, "our transformer layers are post-norm, as the paper's"),
    ("feedforward_activation", "relu", "our feed-forward layers use ReLU"),
    ("n_obs_steps", 1, "our policy sees one observation"),
)


HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")  # owner/name
HUB_FILES = ["config.json", "train_config.json", "*.safetensors", "policy_*processor.json"]


class LeRobotPolicyError(InputError):
    """A LeRobot policy folder that cannot become our network (or ours that cannot become theirs)."""


def hub_folder(name: str | Path) -> Path | None:
    """The downloaded folder of the Hugging Face Hub policy ``name`` (``owner/name``) where nothing of that name
    exists here and it has no file suffix; None otherwise. Needs ``huggingface_hub`` and the Hub (or its cache)."""
    text = str(name)
    if Path(text).exists() or not HUB_ID.match(text) or Path(text).suffix in (".ckpt", ".pt", ".onnx"):
        return None
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise LeRobotPolicyError(
            f"{text} is no file or folder here; as a Hugging Face Hub id it needs `pip install huggingface_hub` "
            "and the Hub (or download its pretrained_model folder and give the folder's path)"
        ) from None
    try:
        return Path(snapshot_download(text, allow_patterns=HUB_FILES))
    except Exception as err:  # noqa: BLE001 - network, authentication and not-found errors of many types
        raise LeRobotPolicyError(
            f"{text} is no file or folder here, and the Hugging Face Hub did not give it ({type(err).__name__}); "
            "download its pretrained_model folder and give the folder's path"
        ) from None


def is_lerobot_policy(path: str | Path) -> bool:
    """Whether ``path`` is a folder holding a LeRobot policy (``config.json`` beside ``model.safetensors``)."""
    path = Path(path)
    return path.is_dir() and (path / CONFIG).is_file() and (path / WEIGHTS).is_file()


# -- theirs -> ours ----------------------------------------------------------------------------------------
def read_config(folder: Path) -> dict:
    try:
        config = json.loads((folder / CONFIG).read_text())
    except (OSError, ValueError, RecursionError) as err:
        raise LeRobotPolicyError(f"{folder / CONFIG} is not readable JSON ({type(err).__name__})") from None
    if not isinstance(config, dict):
        raise LeRobotPolicyError(f"{folder / CONFIG} is not a policy config (a JSON object)")
    if config.get("type") != "act":
        raise LeRobotPolicyError(
            f'{folder}: type {config.get("type")!r} is not a LeRobot ACT policy ("type": "act"); only ACT maps'
        )
    return config


def _features(folder: Path, config: dict) -> tuple[int, list[str], tuple[int, int], int]:
    """(state size, camera names in the policy's order, image (H, W), action size) from its features."""
    inputs, outputs = config.get("input_features") or {}, config.get("output_features") or {}
    shapes = {}
    for key, feature in {**inputs, **outputs}.items():
        shape = feature.get("shape") if isinstance(feature, dict) else None
        if not isinstance(shape, list) or not all(isinstance(d, int) and d > 0 for d in shape):
            raise LeRobotPolicyError(f"{folder / CONFIG}: feature {key!r} has no shape")
        shapes[key] = shape
    extra = [k for k in inputs if k != STATE and not k.startswith(IMAGES)]
    if extra:
        raise LeRobotPolicyError(
            f"{folder}: input feature {extra[0]!r} has no counterpart here (our ACT takes {STATE} and {IMAGES}<camera>)"
        )
    if STATE not in inputs or len(shapes[STATE]) != 1:
        raise LeRobotPolicyError(f"{folder}: the policy needs an input {STATE} of shape [D] (our ACT reads qpos)")
    if list(outputs) != [ACTION] or len(shapes[ACTION]) != 1:
        raise LeRobotPolicyError(
            f"{folder}: the policy's outputs must be one {ACTION} of shape [A], got {list(outputs)}"
        )
    cameras = [k for k in inputs if k.startswith(IMAGES)]
    if not cameras:
        raise LeRobotPolicyError(f"{folder}: the policy takes no camera ({IMAGES}<camera>); ours needs one at least")
    sizes = {tuple(shapes[k]) for k in cameras}
    if len(sizes) != 1 or len(shapes[cameras[0]]) != 3 or shapes[cameras[0]][0] != 3:
        raise LeRobotPolicyError(f"{folder}: its cameras must share one [3, H, W] shape, got {sorted(sizes)}")
    _, height, width = shapes[cameras[0]]
    return shapes[STATE][0], [k[len(IMAGES) :] for k in cameras], (height, width), shapes[ACTION][0]


def network_config(folder: Path, config: dict) -> tuple[ACTConfig, PolicySpec]:
    """Our ``ACTConfig`` and a spec without statistics for the LeRobot ``config``; refuses what does not map."""
    for field, value, why in REQUIRED:
        if field in config and config[field] != value:
            raise LeRobotPolicyError(
                f"{folder}: {field}={json.dumps(config[field])} has no counterpart here ({why}; it must be "
                f"{json.dumps(value)})"
            )
    modes = config.get("normalization_mapping") or {}
    for kind, allowed in (("STATE", ("MEAN_STD",)), ("ACTION", ("MEAN_STD",)), ("VISUAL", ("MEAN_STD", "IDENTITY"))):
        if modes.get(kind, "MEAN_STD") not in allowed:
            raise LeRobotPolicyError(
                f"{folder}: normalization_mapping.{kind}={modes[kind]} has no counterpart here (ours: "
                f"{' or '.join(allowed)})"
            )
    state_dim, cameras, image_size, action_dim = _features(folder, config)
    sizes = {
        "chunk_size": "chunk_size",
        "hidden_dim": "dim_model",
        "ff_dim": "dim_feedforward",
        "heads": "n_heads",
        "enc_layers": "n_encoder_layers",
        "dec_layers": "n_decoder_layers",
        "vae_enc_layers": "n_vae_encoder_layers",
        "latent_dim": "latent_dim",
        "dropout": "dropout",
        "use_vae": "use_vae",
    }
    defaults = ACTConfig()
    values = {ours: config.get(theirs, getattr(defaults, ours)) for ours, theirs in sizes.items()}
    try:
        net_config = ACTConfig(state_dim=state_dim, action_dim=action_dim, num_cameras=len(cameras), **values)
    except (TypeError, ValueError) as err:
        raise LeRobotPolicyError(f"{folder}: its sizes do not make an ACT: {err}") from None
    quality = _ours(folder).get("render_quality")
    spec = PolicySpec(
        task=_task(folder),
        camera_names=tuple(cameras),
        image_size=image_size,
        render_quality=quality if quality in ("paper", "fast") else None,
    )
    return net_config, spec


def _task(folder: Path) -> str | None:
    """Our task: as our exporter recorded it (``aloha_act.json``), else for the gym-aloha task its LeRobot training
    run names (``train_config.json``'s ``env.task``), else None."""
    ours = _ours(folder)
    if isinstance(ours.get("task"), str):
        return ours["task"]
    try:
        env = json.loads((folder / "train_config.json").read_text()).get("env") or {}
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    return GYM_TASKS.get(env.get("task")) if isinstance(env, dict) else None


def _ours(folder: Path) -> dict:
    """``aloha_act.json`` of a folder our exporter wrote ({} where there is none or it is unreadable)."""
    try:
        values = json.loads((folder / OURS).read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    return values if isinstance(values, dict) else {}


def weight_names(config: ACTConfig) -> dict[str, str]:
    """Our ``NormalizedACT`` weight name -> LeRobot's ``ACTPolicy`` one, for every weight but the packed
    attention projections (``attention_names``) and the backbone (the same names under ``model.backbone``)."""
    names = {
        "model.input_proj": "model.encoder_img_feat_input_proj",
        "model.latent_proj": "model.encoder_latent_input_proj",
        "model.qpos_proj": "model.encoder_robot_state_input_proj",
        "model.action_head": "model.action_head",
        "model.decoder.norm": "model.decoder.norm",
    }
    if config.use_vae:
        names.update(
            {
                "model.vae_qpos_proj": "model.vae_encoder_robot_state_input_proj",
                "model.vae_action_proj": "model.vae_encoder_action_input_proj",
                "model.vae_latent_head": "model.vae_encoder_latent_output_proj",
            }
        )
    out = {f"{ours}.{p}": f"{theirs}.{p}" for ours, theirs in names.items() for p in ("weight", "bias")}
    out.update(
        {
            "model.extra_pos.weight": "model.encoder_1d_feature_pos_embed.weight",
            "model.query_embed.weight": "model.decoder_pos_embed.weight",
        }
    )
    if config.use_vae:
        out["model.vae_cls.weight"] = "model.vae_encoder_cls_embed.weight"
    stacks = [("encoder", config.enc_layers, False), ("decoder", config.dec_layers, True)]
    if config.use_vae:
        stacks.append(("vae_encoder", config.vae_enc_layers, False))
    for stack, depth, decoder in stacks:
        for i in range(depth):
            ours, theirs = f"model.{stack}.layers.{i}", f"model.{stack}.layers.{i}"
            pairs = [("ff.linear1", "linear1"), ("ff.linear2", "linear2"), ("norm1", "norm1"), ("norm2", "norm2")]
            pairs += [("norm3", "norm3")] if decoder else []
            for attn in ("self_attn", "cross_attn") if decoder else ("self_attn",):
                name = "multihead_attn" if attn == "cross_attn" else attn
                pairs.append((f"{attn}.out_proj", f"{name}.out_proj"))
            out.update({f"{ours}.{a}.{p}": f"{theirs}.{b}.{p}" for a, b in pairs for p in ("weight", "bias")})
    return out


def attention_names(config: ACTConfig) -> dict[str, str]:
    """Our attention module's prefix -> LeRobot's ``nn.MultiheadAttention`` prefix (its ``in_proj_weight`` is
    our q, k and v projections' weights stacked in that order, ``in_proj_bias`` their biases)."""
    out = {}
    for stack, depth in (
        ("encoder", config.enc_layers),
        ("vae_encoder", config.vae_enc_layers if config.use_vae else 0),
    ):
        out.update({f"model.{stack}.layers.{i}.self_attn": f"model.{stack}.layers.{i}.self_attn" for i in range(depth)})
    for i in range(config.dec_layers):
        out[f"model.decoder.layers.{i}.self_attn"] = f"model.decoder.layers.{i}.self_attn"
        out[f"model.decoder.layers.{i}.cross_attn"] = f"model.decoder.layers.{i}.multihead_attn"
    return out


def _stats(folder: Path, weights: dict, cameras: list[str], visual_mode: str) -> dict[str, torch.Tensor]:
    """``{"<feature>.mean"/".std": tensor}`` from the processors' files, or else the old in-model buffers."""
    files = sorted(folder.glob(f"{PREPROCESSOR}*.safetensors")) + sorted(folder.glob(f"{POSTPROCESSOR}*.safetensors"))
    found: dict[str, torch.Tensor] = {}
    for file in files:
        found.update({k: v for k, v in read_safetensors(file).items() if k not in found})
    # Checkpoints from before LeRobot's processors: buffers named normalize_inputs.buffer_observation_state.mean
    old = re.compile(r"^(normalize_inputs|normalize_targets|unnormalize_outputs)\.buffer_(.+)\.(mean|std)$")
    for name, value in weights.items():
        match = old.match(name)
        if match:
            feature = match.group(2).replace("observation_images_", IMAGES).replace("observation_state", STATE)
            found.setdefault(f"{feature}.{match.group(3)}", value)
    needed = [f"{STATE}.mean", f"{STATE}.std", f"{ACTION}.mean", f"{ACTION}.std"]
    if visual_mode == "MEAN_STD":
        needed += [f"{IMAGES}{cam}.{stat}" for cam in cameras for stat in ("mean", "std")]
    missing = [k for k in needed if k not in found or not bool(torch.isfinite(found[k]).all())]
    if missing:
        raise LeRobotPolicyError(
            f"{folder}: no statistics for {missing[0]} ({len(missing)} missing or infinite in all): neither "
            f"{PREPROCESSOR}*/{POSTPROCESSOR}*.safetensors nor normalize_inputs.* buffers hold them; statistics "
            "are never taken as identity"
        )
    return {k: found[k].float() for k in needed}


def read_lerobot_policy(folder: str | Path) -> tuple[NormalizedACT, dict]:
    """Our ``NormalizedACT`` (fp32, eval mode, on the CPU) holding the LeRobot ACT policy in ``folder``, and its
    execution settings (``temporal_ensemble_coeff``, ``n_action_steps``: how LeRobot runs it).

    Raises ``LeRobotPolicyError`` (one line, naming the field) for what cannot map; see the module docstring.
    """
    from act.model.checkpoint import check_finite_weights

    folder = Path(folder)
    config = read_config(folder)
    net_config, spec = network_config(folder, config)
    try:
        weights = read_safetensors(folder / WEIGHTS)
    except SafetensorsError as err:
        raise LeRobotPolicyError(str(err)) from None
    visual_mode = (config.get("normalization_mapping") or {}).get("VISUAL", "MEAN_STD")
    stats = _stats(folder, weights, list(spec.camera_names), visual_mode)
    ours = {
        "qpos_mean": stats[f"{STATE}.mean"],
        "qpos_std": stats[f"{STATE}.std"] + EPS,  # LeRobot divides by std + eps
        "action_mean": stats[f"{ACTION}.mean"],
        # LeRobot un-normalises with std alone; a constant joint (std 0) gets eps: its action is the mean +- 1e-8
        "action_std": stats[f"{ACTION}.std"].clamp_min(EPS),
    }
    spec = PolicySpec(**{**spec.to_dict(), "stats": {k: v.tolist() for k, v in ours.items()}})
    net = NormalizedACT(net_config, spec)
    state = _our_state_dict(folder, net, weights)
    missing, unexpected = net.load_state_dict(state, strict=False)
    left = [k for k in missing if k not in ours]
    if left or unexpected:
        raise LeRobotPolicyError(f"{folder}: {WEIGHTS} lacks {left[:3]} or has {unexpected[:3]} for its config")
    check_finite_weights(folder / WEIGHTS, state.items(), LeRobotPolicyError)
    if visual_mode == "MEAN_STD":
        cams = [f"{IMAGES}{cam}" for cam in spec.camera_names]
        means = torch.stack([stats[f"{c}.mean"].reshape(-1) for c in cams])  # (C, 3)
        stds = torch.stack([stats[f"{c}.std"].reshape(-1) for c in cams])
        if means.shape[1] != 3 or stds.shape[1] != 3 or not torch.equal(means, means[:1].expand_as(means)):
            raise LeRobotPolicyError(
                f"{folder}: image statistics must be one per-channel mean and std ([3, 1, 1]) shared by every camera"
            )
        net.image_mean.copy_(means[0].view(1, 1, 3, 1, 1))
        net.image_std.copy_((stds[0] + EPS).view(1, 1, 3, 1, 1))
    else:  # IDENTITY: the network sees [0, 1] images
        net.image_mean.zero_()
        net.image_std.fill_(1.0)
    return net.eval(), lerobot_execution(config)


def _our_state_dict(folder: Path, net: NormalizedACT, weights: dict) -> dict[str, torch.Tensor]:
    """``net``'s weights from LeRobot's ``weights``, shapes checked against ``net`` name by name."""
    config = net.config
    theirs = {k: v for k, v in weights.items() if not k.startswith(("normalize_", "unnormalize_"))}
    theirs.pop("model.vae_encoder_pos_enc", None)  # the fixed sinusoid, which our network rebuilds
    wanted = net.state_dict()
    names = {k: k for k in wanted if k.startswith("model.backbone.")}
    names.update(weight_names(config))
    state, used = {}, set()
    for ours, their in names.items():
        state[ours] = _take(folder, theirs, their, wanted[ours].shape)
        used.add(their)
    for ours, their in attention_names(config).items():
        D = config.hidden_dim
        weight = _take(folder, theirs, f"{their}.in_proj_weight", (3 * D, D))
        bias = _take(folder, theirs, f"{their}.in_proj_bias", (3 * D,))
        for i, part in enumerate(("q_proj", "k_proj", "v_proj")):
            state[f"{ours}.{part}.weight"] = weight[i * D : (i + 1) * D]
            state[f"{ours}.{part}.bias"] = bias[i * D : (i + 1) * D]
        for p in ("weight", "bias"):
            state[f"{ours}.out_proj.{p}"] = _take(
                folder, theirs, f"{their}.out_proj.{p}", wanted[f"{ours}.out_proj.{p}"].shape
            )
        used.update(
            {f"{their}.in_proj_weight", f"{their}.in_proj_bias", f"{their}.out_proj.weight", f"{their}.out_proj.bias"}
        )
    left = sorted(set(theirs) - used)
    if left:
        raise LeRobotPolicyError(f"{folder}: {WEIGHTS} has weights its config does not explain, e.g. {left[0]!r}")
    return state


def _take(folder: Path, weights: dict, name: str, shape) -> torch.Tensor:
    if name not in weights:
        raise LeRobotPolicyError(f"{folder}: {WEIGHTS} lacks {name!r}, which its config implies")
    if tuple(weights[name].shape) != tuple(shape):
        raise LeRobotPolicyError(
            f"{folder}: {name} has shape {tuple(weights[name].shape)}, its config makes {tuple(shape)}"
        )
    return weights[name].float()


def lerobot_execution(config: Mapping) -> dict:
    """Our execution settings for how LeRobot runs a policy: temporal ensembling with its coefficient (a query
    every tick), or the first ``n_action_steps`` of each chunk."""
    coeff = config.get("temporal_ensemble_coeff")
    if coeff is not None:
        return {"temporal_ensemble_coeff": float(coeff), "n_action_steps": 1, "blend": None}
    return {"temporal_ensemble_coeff": None, "n_action_steps": int(config.get("n_action_steps") or 100), "blend": None}


# -- ours -> theirs ----------------------------------------------------------------------------------------
def check_exportable(net: NormalizedACT) -> None:
    """Refuse by name what LeRobot's ACT network cannot hold (its execution: ``act.runtime.export``)."""
    c = net.config
    if c.backbone_norm == "group_norm":
        raise LeRobotPolicyError(
            "backbone_norm=group_norm has no counterpart in LeRobot's ACT (FrozenBatchNorm only): train with "
            "policy.model.backbone_norm=batch_norm (from scratch) or frozen_bn (pretrained) to export to LeRobot"
        )
    if c.backbone_layer != 4:
        raise LeRobotPolicyError(
            f"backbone_layer={c.backbone_layer} has no counterpart in LeRobot's ACT (its features are layer4's)"
        )
    if net.image_crop is not None:
        raise LeRobotPolicyError(
            f"image_crop={list(net.image_crop)} has no counterpart in LeRobot's ACT (it sees whole frames): "
            "train without a crop (policy.image_crop=null) to export to LeRobot"
        )


def sinusoid_positions(n: int, dim: int) -> torch.Tensor:
    """(1, n, dim) LeRobot's saved ``vae_encoder_pos_enc``: sin/cos of p / 10000^(2 (j // 2) / dim), in float64."""
    p = np.arange(n)[:, None] / np.power(10000.0, 2 * (np.arange(dim) // 2) / dim)[None, :]
    p[:, 0::2], p[:, 1::2] = np.sin(p[:, 0::2]), np.cos(p[:, 1::2])
    return torch.from_numpy(p).float().unsqueeze(0)


def lerobot_state_dict(net: NormalizedACT) -> dict[str, torch.Tensor]:
    """``net``'s weights under LeRobot ``ACTPolicy``'s names (what its ``model.safetensors`` holds)."""
    config, ours = net.config, {k: v.detach().float().cpu() for k, v in net.state_dict().items()}
    # a trained BatchNorm's running averages are its frozen statistics; LeRobot keeps no update count
    out = {k: v for k, v in ours.items() if k.startswith("model.backbone.") and not k.endswith("num_batches_tracked")}
    out.update({their: ours[name] for name, their in weight_names(config).items()})
    for name, their in attention_names(config).items():
        out[f"{their}.in_proj_weight"] = torch.cat([ours[f"{name}.{p}_proj.weight"] for p in "qkv"])
        out[f"{their}.in_proj_bias"] = torch.cat([ours[f"{name}.{p}_proj.bias"] for p in "qkv"])
        for p in ("weight", "bias"):
            out[f"{their}.out_proj.{p}"] = ours[f"{name}.out_proj.{p}"]
    if config.use_vae:
        out["model.vae_encoder_pos_enc"] = sinusoid_positions(config.chunk_size + 2, config.hidden_dim)
    return out


def lerobot_config(net: NormalizedACT, coeff: float | None, n_action_steps: int) -> dict:
    """LeRobot's ``config.json`` for ``net``: its features, sizes and execution (every other field LeRobot's
    default). The backbone's pretrained weights are null: ours are in the file."""
    c, (h, w) = net.config, net.image_size
    inputs = {STATE: {"type": "STATE", "shape": [c.state_dim]}}
    inputs.update({f"{IMAGES}{cam}": {"type": "VISUAL", "shape": [3, h, w]} for cam in net.camera_names})
    return {
        "type": "act",
        "n_obs_steps": 1,
        "device": "cpu",  # where it loads (LeRobot warns without one); --policy.device=cuda moves it
        "input_features": inputs,
        "output_features": {ACTION: {"type": "ACTION", "shape": [c.action_dim]}},
        "chunk_size": c.chunk_size,
        "n_action_steps": n_action_steps,
        "normalization_mapping": {"VISUAL": "MEAN_STD", "STATE": "MEAN_STD", "ACTION": "MEAN_STD"},
        "vision_backbone": "resnet18",
        "pretrained_backbone_weights": None,
        "replace_final_stride_with_dilation": False,
        "pre_norm": False,
        "dim_model": c.hidden_dim,
        "n_heads": c.heads,
        "dim_feedforward": c.ff_dim,
        "feedforward_activation": "relu",
        "n_encoder_layers": c.enc_layers,
        "n_decoder_layers": c.dec_layers,
        "use_vae": c.use_vae,
        "latent_dim": c.latent_dim,
        "n_vae_encoder_layers": c.vae_enc_layers,
        "temporal_ensemble_coeff": coeff,
        "dropout": c.dropout,
    }


def write_lerobot_policy(
    net: NormalizedACT,
    folder: str | Path,
    temporal_ensemble_coeff: float | None = None,
    n_action_steps: int | None = None,
) -> Path:
    """Write ``net`` as a LeRobot 0.6 ``pretrained_model/`` folder: ``config.json``, ``model.safetensors`` and
    the pre/post-processors with its statistics, which ``ACTPolicy.from_pretrained`` and
    ``make_pre_post_processors(pretrained_path=...)`` load. LeRobot runs it with temporal ensembling at
    ``temporal_ensemble_coeff`` (a query every tick), or else the first ``n_action_steps`` (default: all) of
    each chunk."""
    check_exportable(net)
    coeff = temporal_ensemble_coeff
    n_action_steps = 1 if coeff is not None else int(n_action_steps or net.chunk_size)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = lerobot_config(net, coeff, n_action_steps)
    stats = {
        f"{STATE}.mean": net.qpos_mean,
        f"{STATE}.std": net.qpos_std,  # LeRobot adds 1e-8 to it: a relative change below float32's resolution
        f"{ACTION}.mean": net.action_mean,
        f"{ACTION}.std": net.action_std,
    }
    for cam in net.camera_names:
        stats[f"{IMAGES}{cam}.mean"] = net.image_mean.reshape(3, 1, 1)
        stats[f"{IMAGES}{cam}.std"] = net.image_std.reshape(3, 1, 1)
    stats = {k: v.detach().float().cpu().clone() for k, v in stats.items()}
    features = {**config["input_features"], **config["output_features"]}
    normalizer = {"eps": EPS, "features": features, "norm_map": config["normalization_mapping"]}
    pre_state, post_state = (
        f"{PREPROCESSOR}_step_3_normalizer_processor.safetensors",
        (f"{POSTPROCESSOR}_step_0_unnormalizer_processor.safetensors"),
    )
    write_safetensors(folder / WEIGHTS, lerobot_state_dict(net), {"format": "pt"})
    write_safetensors(folder / pre_state, stats)
    write_safetensors(folder / post_state, stats)
    device = {"registry_name": "device_processor", "config": {"device": "cpu", "float_dtype": None}}
    pre = [
        {"registry_name": "rename_observations_processor", "config": {"rename_map": {}}},
        {"registry_name": "to_batch_processor", "config": {}},
        device,
        {"registry_name": "normalizer_processor", "config": normalizer, "state_file": pre_state},
    ]
    post = [
        {
            "registry_name": "unnormalizer_processor",
            "config": {**normalizer, "features": config["output_features"]},
            "state_file": post_state,
        },
        device,
    ]
    write_json(folder / OURS, {"task": net.spec.task, "render_quality": net.spec.render_quality})
    write_json(folder / f"{PREPROCESSOR}.json", {"name": PREPROCESSOR, "steps": pre})
    write_json(folder / f"{POSTPROCESSOR}.json", {"name": POSTPROCESSOR, "steps": post})
    write_json(folder / CONFIG, config)  # last: the folder is a policy once it holds this
    return folder
