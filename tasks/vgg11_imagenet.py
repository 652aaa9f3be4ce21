"""VGG-11 on ImageNet: the communication-heavy model of SSD-SGD's Figure 7 speed comparison."""
from __future__ import annotations

from .families import ImageNetTask, decay_mxnet_style
from .models.imagenet_zoo import vgg11
from .recipe import Cited, assumed, probe_tiers

SSD = "SSD-SGD"


class VGG11ImageNet(ImageNetTask):
    name = "vgg11-imagenet"
    summary = "VGG-11 on ImageNet (SSD-SGD Sec. 4.6, Fig. 7: speed)"
    model_name = "VGG-11 without BN (torchvision; MXNet symbols/vgg.py default)"
    variants = ("a",)
    augment = "resnet"
    recipes = {
        "ssdsgd-fig7": {
            "workers": Cited(4, f"{SSD} Sec. 4.6: 4 workers and 4 parameter servers"),
            "global_batch": assumed(512, "32 per GPU x 4 GPUs x 4 machines; Fig. 7 states no VGG-11 batch"),
            "optimizer.name": Cited("momentum", f"{SSD}: momentum SGD on the servers (Sec. 3.2.1)"),
            "optimizer.momentum": assumed(0.9, "MXNet fit.py --mom default 0.9"),
            "optimizer.momentum_form": Cited("lr_inside", "MXNet's sgd_mom_update: mom = m mom - lr (g + wd w); "
                                                          "w += mom"),
            "lr_schedule.base_lr": assumed(0.4, "the paper's global lr for batch 32 per GPU (Sec. 4.3)"),
            "lr_schedule.kind": assumed("fixed", "Fig. 7 measures speed only: no schedule is stated"),
            "steps": assumed(1_000, "Fig. 7 averages speed over 4 epochs; a speed probe needs far fewer steps"),
            "weight_decay": assumed(1e-4, "MXNet fit.py --wd default 0.0001"),
            "eval.batch_size": assumed(250, "evaluation batch does not change results"),
        },
    }
    method_defaults = {
        "ssdsgd": {
            "method.k": Cited(5, f"{SSD} Sec. 4.6: SSD-SGD-5"),
            "method.warmup": Cited(499, f"{SSD} Sec. 4.2: 500 warm-up iterations (wp = 499 so that 5 | 1 + wp)"),
            "method.servers": Cited(4, f"{SSD} Sec. 4.6: 4 parameter servers"),
        },
    }
    tiers = probe_tiers(cpu_steps=50, cpu_batch=8)

    def build_model(self, variant, num_classes, **options):
        if options:
            raise ValueError(f"model options {sorted(options)}: use the recipe's VGG-11 as defined")
        return vgg11(num_classes)

    def weight_decay_map(self, model, weight_decay):
        return decay_mxnet_style(model, weight_decay)
