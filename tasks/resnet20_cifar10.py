"""ResNet-20 on CIFAR-10: SSD-SGD Table 2 (its MXNet pre-activation variant) and He et al.'s option A."""
from __future__ import annotations

from .families import CIFAR10_TRAIN, Cifar10Task, decay_everything, decay_mxnet_style, epochs_to_steps
from .models.resnet_cifar import resnet20
from .recipe import Cited, assumed

SSD = "SSD-SGD"
SCRIPT = "SSD-SGD cifar10-dis.sh"
SSD_BATCH = 512  # 32 per GPU x 4 GPUs per worker x 4 workers


class ResNet20CIFAR10(Cifar10Task):
    name = "resnet20-cifar10"
    summary = "ResNet-20 on CIFAR-10 (SSD-SGD Sec. 4.3, Table 2, Fig. 4; He et al. 2016)"
    model_name = "ResNet-20 (SSD-SGD: pre-activation, projection shortcuts; He et al.: option A)"
    variants = ("preact-projection", "option-a")
    recipes = {
        "ssdsgd": {
            "model.variant": Cited("preact-projection", f"{SCRIPT} -> symbols/resnet.py (MXNet v2 units)"),
            "workers": Cited(4, f"{SSD} Sec. 4.1: 4 machines as workers"),
            "global_batch": Cited(SSD_BATCH, f"{SSD} Sec. 4.3: batch 32 per GPU, 4 GPUs per machine, 4 machines"),
            "optimizer.name": Cited("momentum", f"{SCRIPT}: sgd with momentum on the servers"),
            "optimizer.momentum": Cited(0.9, f"{SCRIPT}: --mom 0.9"),
            "optimizer.momentum_form": Cited("lr_inside", "MXNet's sgd_mom_update: mom = m mom - lr (g + wd w); "
                                                          "w += mom"),
            "lr_schedule.base_lr": Cited(0.4, f"{SSD} Sec. 4.3: global lr 0.4"),
            "lr_schedule.kind": Cited("multistep", f"{SCRIPT}: --lr-step-epochs 80,120"),
            "lr_schedule.gamma": Cited(0.1, "MXNet fit.py --lr-factor default 0.1"),
            "lr_schedule.milestones": Cited([epochs_to_steps(e, CIFAR10_TRAIN, SSD_BATCH) for e in (80, 120)],
                                            f"{SCRIPT}: epochs 80 and 120"),
            "steps": Cited(epochs_to_steps(160, CIFAR10_TRAIN, SSD_BATCH), f"{SCRIPT}: --num-epochs 160"),
            "weight_decay": Cited(1e-4, f"{SCRIPT}: --wd 0.0001"),
            "eval.batch_size": assumed(500, "evaluation batch does not change results"),
        },
        "he2016": {
            "model.variant": Cited("option-a", "He et al. 2016 Sec. 4.2: option A shortcuts on CIFAR-10"),
            "global_batch": Cited(128, "He et al. 2016 Sec. 4.2: mini-batch 128"),
            "optimizer.name": Cited("momentum", "He et al. 2016 Sec. 4.2: SGD, momentum 0.9"),
            "optimizer.momentum": Cited(0.9, "He et al. 2016 Sec. 4.2"),
            "lr_schedule.base_lr": Cited(0.1, "He et al. 2016 Sec. 4.2: lr 0.1"),
            "lr_schedule.kind": Cited("multistep", "He et al. 2016 Sec. 4.2: /10 at 32K and 48K iterations"),
            "lr_schedule.gamma": Cited(0.1, "He et al. 2016 Sec. 4.2"),
            "lr_schedule.milestones": Cited([32_000, 48_000], "He et al. 2016 Sec. 4.2"),
            "steps": Cited(64_000, "He et al. 2016 Sec. 4.2: terminate at 64K iterations"),
            "weight_decay": Cited(1e-4, "He et al. 2016 Sec. 4.2: weight decay 0.0001"),
            "eval.batch_size": assumed(500, "evaluation batch does not change results"),
        },
    }
    method_defaults = {
        "ssdsgd": {
            "method.warmup": Cited(500, f"{SSD} Sec. 4.2: 500 warm-up iterations"),
            "method.local_lr_scale": Cited(4.0, f"{SSD} Sec. 4.3: local lr 1.6 for global 0.4"),
        },
    }
    tiers = {
        "paper": {},
        "cpu": {"steps": assumed(2_000, "CPU tier: ~20 epochs at batch 512")},
        "smoke": {"steps": assumed(100, "smoke tier: enough to see the loss fall")},
    }

    def augment_for(self, variant):
        # SSD-SGD's train_cifar10.py trains on 28x28 crops (image_shape 3,28,28); He et al. on 32x32.
        return "resnet28" if variant == "preact-projection" else "resnet32"

    def build_model(self, variant, num_classes, **options):
        if options:
            raise ValueError(f"model options {sorted(options)}: ResNet-20 has none")
        model = resnet20(variant, num_classes)
        model.variant = variant  # the weight-decay convention follows the variant's reference code
        return model

    def weight_decay_map(self, model, weight_decay):
        if getattr(model, "variant", None) == "option-a":
            return decay_everything(model, weight_decay)  # the PyTorch reference's SGD(weight_decay=...)
        return decay_mxnet_style(model, weight_decay)
