"""CifarNet (the TF CIFAR-10 tutorial ConvNet) on CIFAR-10: TernGrad Table 1, with run_multi_gpus_cifar10.sh."""
from __future__ import annotations

from .families import Cifar10Task
from .models.cifarnet import CifarNet
from .recipe import Cited, assumed, terngrad_official

SCRIPT = "terngrad run_multi_gpus_cifar10.sh"

_COMMON = {
    "optimizer.name": Cited("adam", "TernGrad Table 1: Adam"),
    "optimizer.beta1": Cited(0.9, "TF Adam default (the script sets none)"),
    "optimizer.beta2": Cited(0.999, "TF Adam default (the script sets none)"),
    "optimizer.eps": Cited(1e-8, "TF Adam default (the script sets none)"),
    "lr_schedule.base_lr": Cited(2e-4, "TernGrad Table 1: base LR 0.0002"),
    "lr_schedule.kind": Cited("fixed", "official inception_train.py: Adam forces a fixed LR"),
    "weight_decay": Cited(0.004, f"{SCRIPT}: WEIGHT_DECAY=0.004 (on local3/local4 only, as the tutorial)"),
    "ema": Cited(0.9999, f"TF tutorial MOVING_AVERAGE_DECAY; {SCRIPT}: RESTORE_AVG_VAR=True"),
    "eval.batch_size": Cited(50, f"{SCRIPT}: eval batch 50"),
}


class CifarNetCIFAR10(Cifar10Task):
    name = "cifarnet-cifar10"
    summary = "CifarNet on CIFAR-10 (TernGrad Sec. 4.1, Table 1)"
    model_name = "CifarNet (TF CIFAR-10 tutorial ConvNet, 24x24 crops)"
    variants = ("tf",)
    augment = "cifarnet"
    recipes = {
        "2-workers": {
            **_COMMON,
            "workers": Cited(2, "TernGrad Table 1: 2 workers"),
            "global_batch": Cited(128, "TernGrad Table 1: total mini-batch 128"),
            "steps": Cited(300_000, "TernGrad Table 1: 300K iterations"),
        },
        "16-workers": {
            **_COMMON,
            "workers": Cited(16, "TernGrad Table 1: 16 workers"),
            "global_batch": Cited(2048, "TernGrad Table 1: total mini-batch 2048"),
            "steps": Cited(18_750, "TernGrad Table 1: 18.75K iterations"),
        },
    }
    method_defaults = {
        "terngrad": terngrad_official(
            SCRIPT, float_last_layer=Cited(False, f"{SCRIPT}: QUANTIZE_LOGITS=True (every layer ternarized)"),
            min_size=Cited(1, f"{SCRIPT}: SIZE_TO_BINARIZE=1")),
    }
    tiers = {
        "paper": {},
        "cpu": {"steps": assumed(3_000, "CPU tier: 1% of Table 1's 300K iterations (~8 epochs at batch 128)")},
        "smoke": {"steps": assumed(200, "smoke tier: enough to see the loss fall")},
    }

    def build_model(self, variant, num_classes, **options):
        if options:
            raise ValueError(f"model options {sorted(options)}: CifarNet has none (no dropout in the tutorial)")
        return CifarNet(num_classes)

    def weight_decay_map(self, model, weight_decay):
        # The tutorial (and TernGrad's copy) decays only the two locally connected layers' weights.
        return {n: (weight_decay if n in model.decayed_weights else 0.0) for n, _ in model.named_parameters()}
