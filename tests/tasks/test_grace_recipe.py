"""GRACE's ResNet-20 recipe (tf_cnn_benchmarks resnet20_v2 as GRACE ran it): its schedule, Nesterov momentum,
weight decay over the variables without batch norm, and the input scaling, each against the reference's own
arithmetic."""
from __future__ import annotations

import pytest
import torch

from commbench.config import ConfigError, resolve
from commbench.run.optim import lr_at, make_optimizer
from commbench.tasks.data.cifar10 import AUGMENTS
from commbench.tasks.models.resnet_cifar import resnet20
from commbench.tasks.resnet20_cifar10 import ResNet20CIFAR10


def grace(**kw):
    return resolve({"task": "resnet20-cifar10", "method": "baseline", "recipe": "grace", "dataset": "synthetic",
                    "backend": "sim", **kw})


def test_the_lr_drops_where_tf_piecewise_constant_drops_it():
    """tf.train.piecewise_constant keeps values[i] while global_step <= int(epoch x 50,000 / 2,048) - 1: 0.1 up to
    step 3978, 0.01 from 3979 to 5980, 0.001 from 5981."""
    cfg = grace()
    schedule = cfg.lr_schedule
    boundaries = [int(e * 50_000 / 2_048) - 1 for e in (163, 245)]
    assert boundaries == [3978, 5980]
    for step, lr in ((0, 0.1), (3978, 0.1), (3979, 0.01), (5980, 0.01), (5981, 0.001), (8017, 0.001)):
        assert lr_at(schedule, step, cfg.steps) == pytest.approx(lr), step
    assert (cfg.workers, cfg.global_batch, cfg.steps, cfg.model_variant) == (8, 2048, 8018, "preact-option-a")


def test_nesterov_momentum_is_tfs_update():
    """TF MomentumOptimizer(use_nesterov=True): accum = m accum + g; w -= lr (g + m accum), by hand."""
    w = torch.nn.Parameter(torch.tensor([1.0]))
    opt = make_optimizer({"name": "momentum", "momentum": 0.9, "nesterov": True}, [w])
    accum, expected = 0.0, 1.0
    for g in (0.5, -0.25, 1.0):
        w.grad = torch.tensor([g])
        for group in opt.param_groups:
            group["lr"] = 0.1
        opt.step()
        accum = 0.9 * accum + g
        expected -= 0.1 * (g + 0.9 * accum)
        assert w.item() == pytest.approx(expected)
    assert grace().optimizer["nesterov"] is True


def test_nesterov_is_out_of_the_run_id_where_off_and_refused_without_momentum():
    base = {"task": "lenet-mnist", "method": "baseline", "dataset": "synthetic", "backend": "sim"}
    assert resolve({**base, "optimizer.nesterov": False}).run_id == resolve(base).run_id
    assert resolve({**base, "optimizer.nesterov": True}).run_id != resolve(base).run_id
    with pytest.raises(ConfigError, match="optimizer.nesterov: needs optimizer.name=momentum"):
        resolve({**base, "recipe": "vanilla", "optimizer.nesterov": True})


def test_weight_decay_reaches_conv_and_fc_variables_and_never_batch_norm():
    model = resnet20("preact-option-a")
    model.variant = "preact-option-a"
    decay = ResNet20CIFAR10().weight_decay_map(model, 1e-4)
    decayed = {n for n, v in decay.items() if v}
    assert "fc.bias" in decayed and "fc.weight" in decayed and "stem.0.weight" in decayed
    assert not any(".bn" in n or n.startswith(("stem.1.", "head.0.")) for n in decayed)
    convs = sum(1 for m in model.modules() if isinstance(m, torch.nn.Conv2d))
    assert len(decayed) == convs + 2


def test_the_input_is_scaled_to_minus_one_one_with_zero_padding_black():
    aug = AUGMENTS["tf-resnet32"]()
    image = torch.tensor([0.0, 127.5, 255.0]).repeat(32 * 32, 1).T.reshape(1, 3, 32, 32)
    out = aug.eval(image)
    assert out.shape == (1, 3, 32, 32)
    assert torch.equal(out[0, :, 0, 0], torch.tensor([-1.0, 0.0, 1.0]))
    shifted = aug.train(image, torch.tensor([[0.0, 0.0, 0.9]]))  # crop at the top-left corner, no flip
    assert torch.all(shifted[0, :, :4, :] == -1.0) and torch.all(shifted[0, :, :, :4] == -1.0)
