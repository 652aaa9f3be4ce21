"""LeNet on MNIST: TernGrad Section 4.1 and Figure 3, with the recipe of the official run_multi_gpus_lenet.sh."""
from __future__ import annotations

from pathlib import Path

from .base import Task
from .data import load_mnist_format, make_synthetic, provision_fashion_mnist, provision_mnist
from .models import LeNet
from .recipe import Cited, assumed, terngrad_official

SCRIPT = "terngrad run_multi_gpus_lenet.sh"

_COMMON = {
    "steps": Cited(10_000, f"{SCRIPT}: MAX_STEPS=10000"),
    "global_batch": Cited(64, "TernGrad Sec. 4.1 / Fig. 3: total mini-batch size 64"),
    "lr_schedule.kind": Cited("poly", "TernGrad Sec. 4.1: polynomial LR decay"),
    "lr_schedule.power": Cited(0.5, "TernGrad Sec. 4: power 0.5"),
    "lr_schedule.end_lr": Cited(0.0, "TernGrad Sec. 4: decays from the base LR to zero"),
    "weight_decay": Cited(5e-4, "TernGrad Sec. 4.1: weight decay 0.0005"),
    "ema": Cited(0.9999, "TernGrad Sec. 4: parameters' moving average 0.9999, evaluated on it; "
                         f"{SCRIPT}: RESTORE_AVG_VAR=True"),
    "eval.batch_size": Cited(100, f"{SCRIPT}: eval batch 100 on the test split"),
}


class LeNetMNIST(Task):
    name = "lenet-mnist"
    summary = "LeNet on MNIST (TernGrad Sec. 4.1, Fig. 3)"
    model_name = "LeNet (TernGrad TF: SAME pad + ReLU; 'caffe' variant)"
    paper_dataset = "mnist"
    datasets = ("mnist", "fashion-mnist", "synthetic")
    variants = ("tf", "caffe")
    recipes = {
        "momentum": {
            **_COMMON,
            "optimizer.name": Cited("momentum", "TernGrad Sec. 4.1: momentum SGD"),
            "optimizer.momentum": Cited(0.9, "TernGrad Sec. 4: momentum value 0.9"),
            "lr_schedule.base_lr": Cited(0.01, f"TernGrad Sec. 4.1: base LR 0.01 for momentum SGD; {SCRIPT}"),
        },
        "vanilla": {
            **_COMMON,
            "optimizer.name": Cited("sgd", "TernGrad Sec. 4.1: vanilla SGD"),
            "optimizer.momentum": Cited(0.0, "TernGrad Sec. 4.1: vanilla SGD"),
            "lr_schedule.base_lr": Cited(0.1, "TernGrad Sec. 4.1: base LR 0.1 for vanilla SGD"),
        },
    }
    # TernGrad as its LeNet results were produced: the official code with run_multi_gpus_lenet.sh.
    method_defaults = {
        "terngrad": terngrad_official(
            SCRIPT, float_last_layer=Cited(False, f"{SCRIPT}: QUANTIZE_LOGITS=True (every layer ternarized)"),
            min_size=Cited(1, f"{SCRIPT}: SIZE_TO_BINARIZE=1")),
    }
    tiers = {
        "paper": {},
        "cpu": {"steps": assumed(2_000, "CPU tier: 1/5 of the paper's 10K iterations (~2 epochs)")},
        "smoke": {"steps": assumed(300, "smoke tier: a few hundred steps, enough to pass 70% on Fashion-MNIST")},
    }

    def build_model(self, variant, num_classes, **options):
        if options:
            raise ValueError(f"model options {sorted(options)}: LeNet has none (no dropout in TernGrad's LeNet)")
        return LeNet(variant, num_classes)

    def weight_decay_map(self, model, weight_decay):
        # TernGrad's slim LeNet puts the L2 loss on the four weight tensors, none on biases.
        return {n: (weight_decay if n.endswith("weight") else 0.0) for n, _ in model.named_parameters()}

    def train_size(self, dataset):
        return SYNTHETIC_TRAIN if dataset == "synthetic" else 60_000

    def prepare_data(self, dataset, root: Path):
        if dataset == "fashion-mnist":
            provision_fashion_mnist(root)
        elif dataset == "mnist":  # once, before the workers start: mirror or download, then the MD5 check
            provision_mnist(root)

    def load_data(self, dataset, root, variant):
        if dataset == "synthetic":
            return make_synthetic((1, 28, 28), 10, SYNTHETIC_TRAIN, SYNTHETIC_EVAL)
        return load_mnist_format(dataset, root, scaling="caffe" if variant == "caffe" else "pm1")


SYNTHETIC_TRAIN, SYNTHETIC_EVAL = 12_800, 2_000
