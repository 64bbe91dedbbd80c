"""The ACT network: ResNet-18 backbone, position encodings, transformer, CVAE encoder, loss.

``ACT(ACTConfig(...))`` maps (qpos, camera images[, action chunk]) to a predicted action chunk;
``act.model.loss.act_loss`` turns its output into the paper's L1 + beta * KL objective.
"""

from act.model.act import ACT, ACTConfig

__all__ = ["ACT", "ACTConfig"]
