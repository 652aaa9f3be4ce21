"""Every task of docs/contract.md: listed with its parameter count, recipes that cite their sources, and a few
steps of training on synthetic data with the baseline and TernGrad (sim, 2 workers)."""
from __future__ import annotations

import pytest

from commbench.config import resolve
from commbench.launch.runner import execute
from commbench.tasks import TASKS

from ..conftest import commbench

CONTRACT_TASKS = ["lenet-mnist", "cifarnet-cifar10", "alexnet-imagenet", "googlenet-imagenet",
                  "resnet20-cifar10", "resnet50-imagenet", "nin-imagenet", "vgg11-imagenet"]


def test_the_contracts_eight_tasks_exist_in_its_order():
    assert list(TASKS) == CONTRACT_TASKS


def test_list_tasks_shows_models_parameter_counts_and_recipes():
    proc = commbench("list", "tasks")
    assert proc.returncode == 0, proc.stderr
    for name, task in TASKS.items():
        block = proc.stdout.split(f"{name}: ", 1)[1].split("\n    recipes", 1)
        assert f"{task.parameter_count():,} parameters" in block[0]
        assert ", ".join(task.recipes) in block[1].splitlines()[0]
    assert "25,557,032 parameters" in proc.stdout and "132,863,336 parameters" in proc.stdout  # torchvision's


def test_nin_weights_are_the_threshold_papers_gradient_count():
    """Sec. 3.1: 60,719,360 gradients per iteration over 8 nodes = 7,589,920 per node: NiN's weights without
    its 5,256 biases, so the paper counted weight gradients only."""
    model = TASKS["nin-imagenet"].build_model("caffe", 1000)
    weights = sum(p.numel() for p in model.parameters() if p.ndim > 1)
    biases = sum(p.numel() for p in model.parameters() if p.ndim == 1)
    assert 8 * weights == 60_719_360 and biases == 5_256


@pytest.mark.parametrize("task", CONTRACT_TASKS)
def test_every_recipe_value_cites_a_source(task):
    t = TASKS[task]
    layers = [*t.recipes.values(), *t.tiers.values(), *(t.method_overlay(r, m) for r in t.recipes
                                                         for m in ("baseline", "terngrad", "ssdsgd"))]
    for layer in layers:
        for key, cited in layer.items():
            assert cited.source.strip(), (task, key)
            assert cited.source.startswith("assumed: ") or any(
                word in cited.source for word in ("official", "Table", "Sec.", "script", ".sh", ".py", "prototxt", "default",
                                                  "He et al.", "Fig.", "TernGrad", "SSD-SGD", "MXNet", "TF")), \
                (task, key, cited.source)


@pytest.mark.parametrize("method", ["baseline", "terngrad"])
@pytest.mark.parametrize("task", CONTRACT_TASKS)
def test_three_steps_on_synthetic_data(task, method, tmp_path):
    cfg = resolve({"task": task, "method": method, "dataset": "synthetic", "backend": "sim", "workers": 2,
                   "steps": 3, "global_batch": 4, "eval.batch_size": 50, "eval.every": 3, "ema": 0.0})
    result = execute(cfg, tmp_path, show_progress=False)
    rec = result.record
    assert rec["status"] == "done", rec["error"]
    assert rec["metrics"]["steps"] == 3 and rec["metrics"]["top1"] is not None
    assert rec["data"]["synthetic"] is True and rec["data"]["substitute_for"] == TASKS[task].paper_dataset
    assert rec["metrics"]["parameters"] == TASKS[task].parameter_count(cfg.model_variant)
    assert rec["metrics"]["bytes_sent"] > 0
