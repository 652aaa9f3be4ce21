"""ResNet-50 on ImageNet: SSD-SGD Table 2 and Figures 5-7 (batch 64 and 32 per GPU)."""
from __future__ import annotations

from .families import IMAGENET_TRAIN, ImageNetTask, decay_mxnet_style, epochs_to_steps
from .models.imagenet_zoo import resnet50
from .models.timm_models import mxnet_resnet50_v2
from .recipe import Cited, assumed, probe_tiers

SSD = "SSD-SGD"
SCRIPT = "SSD-SGD res-imagenet.sh"
EPOCHS = 90  # not stated by the paper


def _row(per_gpu: int, lr: float, warmup_epochs: int) -> dict:
    batch = per_gpu * 4 * 4  # 4 GPUs per machine, 4 machines
    row = {
        "workers": Cited(4, f"{SSD} Sec. 4.1: 4 machines as workers"),
        "global_batch": Cited(batch, f"{SSD} Sec. 4.3: batch {per_gpu} per GPU, 4 GPUs per machine, 4 machines"),
        "optimizer.name": Cited("momentum", f"{SCRIPT}: sgd with momentum on the servers"),
        "optimizer.momentum": assumed(0.9, "MXNet fit.py --mom default 0.9; the paper states none"),
        "optimizer.momentum_form": Cited("lr_inside", "MXNet's sgd_mom_update: mom = m mom - lr (g + wd w); w += mom"),
        "lr_schedule.base_lr": Cited(lr, f"{SSD} Sec. 4.3: global lr {lr}"),
        "lr_schedule.kind": Cited("poly", f"{SCRIPT}: --lr-scheduler pow-2 (PolyScheduler)"),
        "lr_schedule.power": Cited(2.0, f"{SCRIPT}: pow-2"),
        "lr_schedule.end_lr": assumed(0.0, "MXNet PolyScheduler's final_lr default 0"),
        "steps": assumed(epochs_to_steps(EPOCHS, IMAGENET_TRAIN, batch), f"{EPOCHS} epochs (the paper gives none)"),
        "weight_decay": assumed(1e-4, "MXNet fit.py --wd default 0.0001; the paper states none"),
        "eval.batch_size": assumed(250, "evaluation batch does not change results"),
    }
    if warmup_epochs:
        row["lr_schedule.warmup_steps"] = Cited(epochs_to_steps(warmup_epochs, IMAGENET_TRAIN, batch),
                                                f"{SSD} Sec. 4.3: WP stage of {warmup_epochs} epochs for batch 64")
    return row


class ResNet50ImageNet(ImageNetTask):
    name = "resnet50-imagenet"
    summary = "ResNet-50 on ImageNet (SSD-SGD Sec. 4.3-4.6, Table 2)"
    # SSD-SGD trained MXNet's symbols/resnet.py, a pre-activation (v2) ResNet-50 with 25,549,486 parameters:
    # timm's resnetv2_50 with MXNet's input and stem BatchNorms is that network (tasks/models/timm_models.py).
    # torchvision's v1 (25,557,032), which earlier records ran, stays as a variant.
    model_name = "ResNet-50 v2 (pre-activation; timm resnetv2_50 + MXNet's input and stem BN, as SSD-SGD's MXNet)"
    variants = ("mxnet-v2", "torchvision-v1")
    augment = "resnet"
    recipes = {"batch64": _row(64, 0.8, 5), "batch32": _row(32, 0.4, 0)}
    method_defaults = {
        "ssdsgd": {
            "method.warmup": Cited(500, f"{SSD} Sec. 4.2: 500 warm-up iterations in all experiments"),
            "method.local_lr_scale": Cited(4.0, f"{SSD} Sec. 4.3: local lr 3.2 / 1.6 for global 0.8 / 0.4"),
        },
    }
    tiers = probe_tiers(cpu_steps=100, cpu_batch=16)

    def build_model(self, variant, num_classes, **options):
        if options:
            raise ValueError(f"model options {sorted(options)}: ResNet-50 has none")
        if variant == "torchvision-v1":
            return resnet50(num_classes)
        return mxnet_resnet50_v2(num_classes)

    def weight_decay_map(self, model, weight_decay):
        return decay_mxnet_style(model, weight_decay)
