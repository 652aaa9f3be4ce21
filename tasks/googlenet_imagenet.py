"""GoogLeNet (Inception-v1 with BN, no auxiliary classifiers) on ImageNet: TernGrad Sec. 4.2 and Table 3."""
from __future__ import annotations

from .families import ImageNetTask, decay_weights_only
from .models.googlenet import GoogLeNetBN
from .recipe import Cited, assumed, probe_tiers, terngrad_official

TABLE = "TernGrad Table 3"
SCRIPT = "terngrad run_multi_gpus_googlenet_quick.sh"
ROWS = {"2-workers": (2, 0.04, 128, 600_000, 1e-5), "4-workers": (4, 0.08, 256, 300_000, 1e-5),
        "8-workers": (8, 0.10, 512, 300_000, 2e-5)}  # workers, base LR, batch, iterations, TernGrad's wd


def _row(workers: int, lr: float, batch: int, iterations: int) -> dict:
    return {
        "workers": Cited(workers, f"{TABLE}: {workers} workers"),
        "global_batch": Cited(batch, f"{TABLE}: mini-batch {batch}"),
        "steps": Cited(iterations, f"{TABLE}: {iterations:,} iterations"),
        "lr_schedule.base_lr": Cited(lr, f"{TABLE}: base LR {lr}"),
        "optimizer.name": Cited("momentum", "TernGrad Sec. 4.2: momentum SGD"),
        "optimizer.momentum": Cited(0.9, f"{SCRIPT}: momentum 0.9"),
        "lr_schedule.kind": Cited("poly", "TernGrad Sec. 4.2: polynomial LR decay"),
        "lr_schedule.power": Cited(0.5, f"{SCRIPT}: power 0.5"),
        "lr_schedule.end_lr": Cited(0.0, f"{SCRIPT}: decays to 0 at MAX_STEPS"),
        "weight_decay": Cited(4e-5, f"{TABLE}: weight decay 4e-5 for floating gradients"),
        "model.dropout": Cited(0.2, f"{TABLE}: dropout ratio 0.2 for floating gradients"),
        "ema": Cited(0.9999, "official inception_model.py MOVING_AVERAGE_DECAY; RESTORE_AVG_VAR=True"),
        "eval.batch_size": assumed(250, "evaluation batch does not change results"),
    }


_TERNGRAD = {
    "model.dropout": Cited(0.08, f"{TABLE}: dropout ratio 0.08 for TernGrad"),
    **terngrad_official(
        SCRIPT, float_last_layer=Cited(True, "TernGrad Sec. 4.2 (3); official default: logits not quantized"),
        min_size=Cited(1, f"{SCRIPT}: SIZE_TO_BINARIZE=1")),
}


class GoogLeNetImageNet(ImageNetTask):
    name = "googlenet-imagenet"
    summary = "GoogLeNet (Inception-v1 + BN, no aux heads) on ImageNet (TernGrad Sec. 4.2, Table 3)"
    model_name = "Inception-v1 with BN (TF-slim), no auxiliary classifiers"
    variants = ("slim",)
    # Approximates slim's Inception distortion (random box of 5-100% area, aspect 3/4-4/3, flip) by
    # random-resized-crop; the colour distortion is not reproduced.
    augment = "resnet"
    recipes = {name: _row(*row[:4]) for name, row in ROWS.items()}
    tiers = probe_tiers(cpu_steps=200, cpu_batch=16)

    def method_overlay(self, recipe, method):
        if method != "terngrad":
            return {}
        wd = ROWS[recipe][4]
        return {**_TERNGRAD, "weight_decay": Cited(wd, f"{TABLE}: weight decay {wd:g} for TernGrad ({recipe})")}

    def build_model(self, variant, num_classes, dropout=0.2):
        return GoogLeNetBN(num_classes, dropout=dropout)

    def weight_decay_map(self, model, weight_decay):
        return decay_weights_only(model, weight_decay)  # slim inception_arg_scope: conv weights only
