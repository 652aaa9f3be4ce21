"""alexnet-mxnet-imagenet: MXNet's AlexNet (symbols/alexnet.py) as SSD-SGD's alex.sh runs it. Its size is the
paper's 203.4 MB, its recipe alex.sh's, and it trains a step on synthetic data and reads the ImageNet folders."""
from __future__ import annotations

import pytest
import torch

from commbench.config import resolve
from commbench.launch.runner import execute
from commbench.tasks import TASKS, families
from commbench.tasks.families import IMAGENET_TRAIN
from commbench.tasks.models.alexnet_mxnet import AlexNetMXNet

from .test_data_formats import write_image_folder

TASK = "alexnet-mxnet-imagenet"

# (name, shape) of every tensor, in MXNet's order of arguments: conv1_weight, conv1_bias, ...
MXNET_ALEXNET = [
    ("conv1.weight", (96, 3, 11, 11)), ("conv1.bias", (96,)),
    ("conv2.weight", (256, 96, 5, 5)), ("conv2.bias", (256,)),
    ("conv3.weight", (384, 256, 3, 3)), ("conv3.bias", (384,)),
    ("conv4.weight", (384, 384, 3, 3)), ("conv4.bias", (384,)),
    ("conv5.weight", (256, 384, 3, 3)), ("conv5.bias", (256,)),
    ("fc1.weight", (4096, 6400)), ("fc1.bias", (4096,)),  # 256 x 5 x 5 after the third pool at 224 px
    ("fc2.weight", (4096, 4096)), ("fc2.bias", (4096,)),
    ("fc3.weight", (1000, 4096)), ("fc3.bias", (1000,)),
]


def test_parameter_count_is_the_papers_203_4_mb():
    """SSD-SGD Sec. 4.6: "AlexNet ... 203.4MB": 50,844,008 float32 parameters at 10^6 bytes per MB."""
    count = TASKS[TASK].parameter_count()
    assert count == 50_844_008
    assert round(4 * count / 1e6, 2) == 203.38
    assert count != TASKS["alexnet-imagenet"].parameter_count()  # TernGrad's AlexNet-BN is another network


def test_layers_are_mxnets_in_its_order():
    with torch.device("meta"):
        model = AlexNetMXNet(1000)
    assert [(n, tuple(p.shape)) for n, p in model.named_parameters()] == MXNET_ALEXNET
    assert not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules())


def test_forward_at_224_px_gives_1000_logits():
    torch.manual_seed(0)
    model = TASKS[TASK].build_model("mxnet", 1000).eval()
    with torch.no_grad():
        logits = model(torch.randn(2, 3, 224, 224))
    assert logits.shape == (2, 1000) and torch.isfinite(logits).all()


def test_lrn_is_mxnets_formula():
    """MXNet's LRN: x / (knorm + alpha / nsize * sum over 5 channels of x^2)^beta, knorm 2, alpha 1e-4, beta 0.75
    (TF's convention, alpha without the 1 / nsize, would differ by a factor of 5 inside the sum)."""
    x = torch.randn(1, 7, 3, 3) * 30
    model = AlexNetMXNet(10)
    squares = torch.nn.functional.pad(x.pow(2), (0, 0, 0, 0, 2, 2))
    window = sum(squares[:, c:c + 7] for c in range(5))
    expected = x / (2.0 + 1e-4 / 5 * window) ** 0.75
    assert torch.allclose(model.lrn1(x), expected, rtol=1e-5)


def test_init_is_mxnets_normal():
    """fit.py gives AlexNet mx.init.Normal(): weights N(0, 0.01), biases 0."""
    torch.manual_seed(0)
    model = AlexNetMXNet(1000)
    assert model.fc1.weight.std().item() == pytest.approx(0.01, rel=0.01)
    assert all(not p.any() for n, p in model.named_parameters() if n.endswith("bias"))


def test_recipe_is_alex_sh():
    """alex.sh: 4 workers of 4 GPUs at 64 per GPU, lr 0.4 (local 1.6), 90 epochs of poly-2 after 5 of linear
    warm-up, momentum 0.9 in MXNet's form, wd 1e-4 on weights only."""
    cfg = resolve({"task": TASK, "method": "baseline", "dataset": "synthetic"})
    assert (cfg.workers, cfg.global_batch, cfg.steps) == (4, 1024, 90 * (IMAGENET_TRAIN // 1024))
    assert cfg.lr_schedule["base_lr"] == 0.4 and cfg.lr_schedule["kind"] == "poly"
    assert cfg.lr_schedule["power"] == 2.0 and cfg.lr_schedule["warmup_steps"] == 5 * (IMAGENET_TRAIN // 1024)
    assert (cfg.optimizer["momentum"], cfg.optimizer["momentum_form"]) == (0.9, "lr_inside")
    assert cfg.weight_decay == 1e-4
    decay = TASKS[TASK].weight_decay_map(AlexNetMXNet(10), 1e-4)
    assert decay["conv1.weight"] == decay["fc3.weight"] == 1e-4 and decay["conv1.bias"] == decay["fc3.bias"] == 0
    half = resolve({"task": TASK, "method": "baseline", "recipe": "batch32"})
    assert (half.global_batch, half.lr_schedule["base_lr"]) == (512, 0.2)


def test_ssdsgd_defaults_are_figure_7s():
    cfg = resolve({"task": TASK, "method": "ssdsgd", "dataset": "synthetic"})
    params = cfg.method_params
    assert (params["k"], params["warmup"], params["servers"], params["local_lr_scale"]) == (5, 499, 4, 4.0)
    assert cfg.optimizer["momentum_form"] == "lr_inside"


def test_every_recipe_value_cites_alex_sh_the_paper_or_an_assumption():
    task = TASKS[TASK]
    layers = [*task.recipes.values(), *task.tiers.values(),
              *(task.method_overlay(r, m) for r in task.recipes for m in ("baseline", "ssdsgd"))]
    for layer in layers:
        for key, cited in layer.items():
            assert cited.source.startswith(("assumed: ", "SSD-SGD", "MXNet")), (key, cited.source)


def test_names_say_mxnets_alexnet_as_ssdsgd_runs_it():
    task = TASKS[TASK]
    for text in (task.summary, task.model_name):
        assert "MXNet" in text and "SSD-SGD" in text


def test_one_step_on_synthetic_data(tmp_path, monkeypatch):
    monkeypatch.setitem(families.SYNTHETIC_EVAL, "imagenet", 4)  # scoring 100 images at 224 px costs more
    cfg = resolve({"task": TASK, "method": "baseline", "dataset": "synthetic", "backend": "sim", "workers": 1,
                   "steps": 1, "global_batch": 2, "eval.batch_size": 4, "eval.every": 1})
    record = execute(cfg, tmp_path, show_progress=False).record
    assert record["status"] == "done", record["error"]
    assert record["metrics"]["parameters"] == 50_844_008
    assert record["data"]["synthetic"] is True and record["data"]["substitute_for"] == "imagenet"


def test_reads_the_imagenet_folders_at_224_px(tmp_path):
    write_image_folder(tmp_path)
    data = TASKS[TASK].load_data("imagenet", tmp_path, "mxnet")
    x, y = data.train_batch(torch.tensor([0, 1]), step=0, seed=1)
    assert x.shape == (2, 3, 224, 224) and data.input_shape == (3, 224, 224)
