"""The network follows its inputs' device: nothing in its forward pass or loss is made on a fixed
device, so an export traced on the CPU runs on a GPU (issue 29, item 1).

``torch.jit.trace`` records ``torch.zeros(..., device=x.device)`` as ``Device = prim::Constant[value="cpu"]``;
the exported file then mixed devices on CUDA. The ``meta`` device stands in for a GPU: a network moved
there and fed meta inputs fails at the first tensor that was made on the CPU.
"""

from __future__ import annotations

import warnings

import torch
from helpers import IMAGE_HW, tiny_config
from torch import nn

from act.model.loss import act_loss
from act.model.normalized import NormalizedACT
from act.model.spec import PolicySpec
from act.runtime.export import example_inputs, export


def tiny_network() -> NormalizedACT:
    torch.manual_seed(0)
    # dropout 0: the CPU's cheap dropout mask is drawn on the CPU by design (act/model/dropout.py)
    config = tiny_config(state_dim=14, action_dim=14, dropout=0.0)
    return NormalizedACT(config, PolicySpec(image_size=IMAGE_HW))


class TrainingLoss(nn.Module):
    """The training objective as one module, so that tracing records forward and loss together."""

    def __init__(self, net: NormalizedACT):
        super().__init__()
        self.net = net

    def forward(self, qpos, images, actions):
        out = self.net.outputs(qpos, images, actions)  # is_pad None: the network makes the mask
        return act_loss(out["actions"], out["target"], None, out["mu"], out["logvar"], kl_weight=10.0)["loss"]


def test_exported_torchscript_graph_holds_no_device_constant(tmp_path):
    path = export(tiny_network(), tmp_path / "policy.pt", "torchscript")
    graph = str(torch.jit.load(str(path)).inlined_graph)
    assert "Device = prim::Constant" not in graph
    assert 'value="cpu"' not in graph
    assert "<Tensor>" not in graph  # no tensor made at trace time and frozen in (on the CPU)


def test_traced_forward_and_loss_run_on_another_device():
    net = tiny_network()
    qpos, images = example_inputs(net)
    actions = torch.randn(2, net.chunk_size, 14)
    loss = TrainingLoss(net).train()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on the shape checks it freezes
        traced_policy = torch.jit.trace(net.eval(), (qpos, images), check_trace=False)
        traced_loss = torch.jit.trace(loss, (qpos, images, actions), check_trace=False)
    meta = [x.to("meta") for x in (qpos, images, actions)]
    assert traced_policy.to("meta")(*meta[:2]).shape == (2, net.chunk_size, 14)
    assert traced_loss.to("meta")(*meta).device.type == "meta"
    # Eagerly too: a tensor made without a device (the CPU by default) would meet the meta ones here.
    eager = TrainingLoss(tiny_network()).to("meta")
    assert eager.train()(*meta).shape == ()
    assert eager.net.eval()(*meta[:2]).device.type == "meta"
