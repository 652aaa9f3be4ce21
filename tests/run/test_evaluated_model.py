"""Which model a run's accuracy is of: worker 0's own (SSD-SGD's local weights with their BatchNorm statistics, as
MXNet's fit scores them), and for a method with global weights those too, with BatchNorm recomputed for them;
and BatchNorm over slices of a worker's batch (``model.bn_batch``), as a worker of several devices computes it."""
from __future__ import annotations

import copy

import pytest
import torch

from commbench.config import ConfigError, resolve
from commbench.methods.comm import SimCommunicator
from commbench.run.evaluation import evaluate, recompute_batch_norm
from commbench.config.resolve import server_count
from commbench.run.train import GlobalBatches, Trainer
from commbench.store.records import Status
from commbench.tasks.models.sliced_bn import SlicedBatchNorm, slice_batch_norm

STEPS = 6


def trained(method: str, **settings) -> tuple[Trainer, dict]:
    cfg = resolve({"task": "resnet20-cifar10", "dataset": "synthetic", "method": method, "backend": "sim",
                   "workers": 2, "global_batch": 16, "steps": STEPS, "threads": 1, "eval.every": 3,
                   "eval.bn_batches": 3, **settings})
    trainer = Trainer(cfg, SimCommunicator(2, num_servers=server_count(cfg)), checkpoints=None)
    for step in range(STEPS):
        trainer.step(step)
        trainer.loop.done = step + 1
        trainer.log_point(step, None)
    return trainer, trainer.outcome(Status.DONE, None, keep_weights=False).metrics


def test_ssdsgd_scores_the_local_model_and_the_global_weights_with_their_own_batch_norm():
    trainer, metrics = trained("ssdsgd", **{"method.k": 1, "method.warmup": 1, "method.topology": "ps"})
    local = trainer.models[0]
    assert metrics["top1"] == evaluate(local, trainer.data, 500, torch.device("cpu"))[0]
    # the global weights, with BatchNorm statistics recomputed by hand: reset, then the cumulative average over
    # worker 0's first 3 batches (8 images each), unaugmented
    glob = copy.deepcopy(local)
    glob.load_state_dict({**local.state_dict(), **trainer.method.eval_weights()})
    norms = [m for m in glob.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
    glob.eval()
    for m in norms:
        m.train()
    batches = GlobalBatches(trainer.data.train_size, 16, 1)
    with torch.no_grad():
        for step in range(3):
            glob(trainer.data.plain_train_batch(batches.indices(step)[:8])[0])
    assert metrics["top1_global"] == evaluate(glob, trainer.data, 500, torch.device("cpu"))[0]
    assert not torch.equal(norms[0].running_mean, [m for m in local.modules()
                                                   if isinstance(m, torch.nn.BatchNorm2d)][0].running_mean)
    assert all("top1_global" in h for h in trainer.loop.history if h.get("top1") is not None)


def test_a_synchronous_method_is_scored_on_its_own_model_and_has_no_global_score():
    trainer, metrics = trained("baseline", **{"method.topology": "ps"})
    assert "top1_global" not in metrics and trainer.global_model is None
    assert metrics["top1"] == evaluate(trainer.models[0], trainer.data, 500, torch.device("cpu"))[0]


def test_recomputing_batch_norm_leaves_a_model_without_it_alone_and_reads_nothing():
    model = torch.nn.Sequential(torch.nn.Linear(3, 2))
    before = copy.deepcopy(model.state_dict())

    def never():
        raise AssertionError("read")
        yield

    recompute_batch_norm(model, never(), torch.device("cpu"))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


# -- BatchNorm over slices ---------------------------------------------------------------------------------------
def test_batch_norm_over_slices_normalises_each_slice_with_its_own_statistics():
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(3)
    holder = torch.nn.Sequential(copy.deepcopy(bn))
    slice_batch_norm(holder, 4)
    sliced = holder[0]
    x = torch.randn(12, 3, 5, 5) * torch.arange(1, 13).view(12, 1, 1, 1)  # slices of very different scale
    out = sliced.train()(x)
    for i in range(3):
        one = torch.nn.BatchNorm2d(3).train()
        assert torch.allclose(out[4 * i:4 * (i + 1)], one(x[4 * i:4 * (i + 1)]), atol=1e-5)
    # the running statistics move once, by the mean of the slices' statistics (the devices' average)
    means = torch.stack([x[4 * i:4 * (i + 1)].mean(dim=(0, 2, 3)) for i in range(3)]).mean(0)
    assert torch.allclose(sliced.running_mean, 0.1 * means, atol=1e-6) and int(sliced.num_batches_tracked) == 1
    assert not torch.allclose(out, bn.train()(x), atol=1e-3)  # not the whole batch's normalisation
    sliced.eval()
    assert torch.equal(sliced(x[:2]), torch.nn.functional.batch_norm(x[:2], sliced.running_mean, sliced.running_var,
                                                                     sliced.weight, sliced.bias, False, 0.1, 1e-5))


def test_bn_batch_reaches_every_batch_norm_of_the_model_and_is_the_plain_model_when_unset():
    cfg = resolve({"task": "resnet20-cifar10", "method": "baseline", "model.bn_batch": 32})
    assert cfg.model_options == {"bn_batch": 32}
    from commbench.tasks import TASKS

    task = TASKS["resnet20-cifar10"]
    torch.manual_seed(1)
    plain = task.make_model(cfg.model_variant, 10, 3, {})
    torch.manual_seed(1)
    sliced = task.make_model(cfg.model_variant, 10, 3, {"bn_batch": 32})
    norms = [m for m in sliced.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    assert norms and all(isinstance(m, SlicedBatchNorm) and m.slice_size == 32 for m in norms)
    assert not any(isinstance(m, SlicedBatchNorm) for m in plain.modules())
    x = torch.randn(32, 3, 32, 32)
    assert torch.equal(plain.train()(x), sliced.train()(x))  # one slice: torch's BatchNorm, bit for bit
    unset = resolve({"task": "resnet20-cifar10", "method": "baseline"})
    assert unset.model_options == {} and unset.run_id != cfg.run_id


@pytest.mark.parametrize("settings,message", [
    ({"task": "lenet-mnist", "model.bn_batch": 16}, "has no BatchNorm layer"),
    ({"task": "resnet20-cifar10", "model.bn_batch": 48}, "does not split a worker's batch of 128 evenly"),
])
def test_bad_bn_batch_is_named(settings, message):
    with pytest.raises(ConfigError, match=message):
        resolve({"method": "baseline", **settings})


def test_slicing_counts_what_it_replaced():
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 1), torch.nn.BatchNorm2d(2),
                                torch.nn.Sequential(torch.nn.BatchNorm2d(2)))
    assert slice_batch_norm(model, 4) == 2 and slice_batch_norm(model, 4) == 0
