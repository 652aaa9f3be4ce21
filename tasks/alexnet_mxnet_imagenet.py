"""MXNet's AlexNet on ImageNet, as SSD-SGD's scripts run it: the model of its Sec. 4.6 size (203.4 MB) and of
Figure 7's AlexNet speed-ups (batch 64 and 32 per GPU, 4 servers and 4 workers).

The recipe is the authors' ``alex.sh`` (main-520/SSD-SGD, example/image-classification): ``launch.py -s 4 -n 4``
(4 servers, 4 worker machines), ``--gpus 0,1,2,3 --batch-size 256`` (MXNet's batch is the machine's: 64 per GPU),
``--lr 0.4 --lr-local 1.6``, ``--num-epochs 90``, ``--lr-step-epochs pow-2`` (fit.py: PolyScheduler of power 2
over the 90 epochs), ``--warmup-epochs 5 --warmup-strategy linear``, ``--mom 0.9 --wd 0.0001``,
``--kv-store dist_sync``. TernGrad's AlexNet-BN (alexnet_imagenet.py) is another network and another recipe.
"""
from __future__ import annotations

from .families import IMAGENET_TRAIN, ImageNetTask, decay_mxnet_style, epochs_to_steps
from .models.alexnet_mxnet import AlexNetMXNet
from .recipe import Cited, assumed, probe_tiers

SSD = "SSD-SGD"
SCRIPT = "SSD-SGD alex.sh"
EPOCHS = 90
GPUS_PER_WORKER = 4   # alex.sh --gpus 0,1,2,3
WORKERS = 4           # alex.sh launch.py -n 4


def _batch(per_gpu: int) -> dict:
    batch = per_gpu * GPUS_PER_WORKER * WORKERS
    if per_gpu == 64:
        return {"global_batch": Cited(batch, f"{SCRIPT}: --batch-size 256 per machine (64 per GPU on 4 GPUs) "
                                             f"x 4 workers; {SSD} Sec. 4.6: AlexNet batch 64")}
    return {"global_batch": Cited(batch, f"{SSD} Sec. 4.6 (Fig. 7): AlexNet at batch 32 per GPU, 4 GPUs per "
                                         f"machine, 4 workers")}


def _learning_rate(per_gpu: int) -> dict:
    """alex.sh's lr is for 64 per GPU; for 32 the paper's own rule (ResNet-50's lr halves with its batch)."""
    if per_gpu == 64:
        return {"lr_schedule.base_lr": Cited(0.4, f"{SCRIPT}: --lr 0.4")}
    return {"lr_schedule.base_lr": assumed(0.2, f"{SCRIPT}'s lr 0.4 at 64 per GPU halved with the batch, as "
                                                f"{SSD} Sec. 4.3 halves ResNet-50's (0.8 / 0.4 for 64 / 32); no "
                                                f"script states AlexNet's at 32")}


def _warmup(per_gpu: int, batch: int) -> dict:
    steps = epochs_to_steps(5, IMAGENET_TRAIN, batch)
    if per_gpu == 64:
        return {"lr_schedule.warmup_steps": Cited(steps, f"{SCRIPT}: --warmup-epochs 5 --warmup-strategy linear")}
    return {"lr_schedule.warmup_steps": assumed(steps, f"{SCRIPT}'s 5 epochs (fit.py's default too, which every "
                                                       f"run of its PolyScheduler gets); no script for batch 32")}


def _row(per_gpu: int) -> dict:
    batch = per_gpu * GPUS_PER_WORKER * WORKERS
    return {
        "workers": Cited(WORKERS, f"{SCRIPT}: launch.py -n 4; {SSD} Sec. 4.6: 4 workers and 4 servers"),
        **_batch(per_gpu),
        "optimizer.name": Cited("momentum", f"{SCRIPT}: --optimizer sgd --mom 0.9 on the servers"),
        "optimizer.momentum": Cited(0.9, f"{SCRIPT}: --mom 0.9"),
        # SSGD and SSD-SGD both ran in MXNet, so both take its momentum form
        "optimizer.momentum_form": Cited("lr_inside", "MXNet's sgd_mom_update: mom = m mom - lr (g + wd w); "
                                                      "w += mom"),
        **_learning_rate(per_gpu),
        "lr_schedule.kind": Cited("poly", f"{SCRIPT}: --lr-step-epochs pow-2 (fit.py: PolyScheduler)"),
        "lr_schedule.power": Cited(2.0, f"{SCRIPT}: pow-2"),
        "lr_schedule.end_lr": assumed(0.0, "MXNet PolyScheduler's final_lr default 0"),
        **_warmup(per_gpu, batch),
        "steps": Cited(epochs_to_steps(EPOCHS, IMAGENET_TRAIN, batch), f"{SCRIPT}: --num-epochs {EPOCHS}"),
        "weight_decay": Cited(1e-4, f"{SCRIPT}: --wd 0.0001"),
        "model.dropout": Cited(0.5, "MXNet symbols/alexnet.py: Dropout p=0.5 after fc1 and fc2"),
        "eval.batch_size": assumed(250, "evaluation batch does not change results; 50,000 / 250 batches"),
    }


class AlexNetMXNetImageNet(ImageNetTask):
    name = "alexnet-mxnet-imagenet"
    summary = "MXNet's AlexNet on ImageNet, as SSD-SGD's alex.sh runs it (SSD-SGD Sec. 4.6: size, Fig. 7 speed)"
    model_name = "AlexNet (MXNet symbols/alexnet.py, as SSD-SGD's scripts run it: one tower, LRN, no BN)"
    variants = ("mxnet",)
    # MXNet's set_imagenet_aug: random resized crop (area 0.08-1, aspect 3/4-4/3) and mirror, as torchvision's;
    # its colour jitter and PCA noise are not applied here
    augment = "resnet"
    recipes = {"batch64": _row(64), "batch32": _row(32)}
    method_defaults = {
        "ssdsgd": {
            "method.k": Cited(5, f"{SSD} Sec. 4.6: SSD-SGD-5 in Fig. 7"),
            "method.warmup": Cited(499, f"{SSD} Sec. 4.2: 500 warm-up iterations (wp = 499 so that 5 | 1 + wp)"),
            "method.servers": Cited(4, f"{SCRIPT}: launch.py -s 4; {SSD} Sec. 4.6: 4 parameter servers"),
            "method.local_lr_scale": Cited(4.0, f"{SCRIPT}: lr 0.4, lr-local 1.6"),
            "optimizer.momentum_form": Cited("lr_inside", "SSD-SGD trains in MXNet: sgd_mom_update, "
                                                          "mom = m mom - lr (g + wd w); w += mom"),
        },
    }
    tiers = probe_tiers(cpu_steps=200, cpu_batch=16)

    def build_model(self, variant, num_classes, dropout=0.5):
        return AlexNetMXNet(num_classes, dropout=dropout)

    def weight_decay_map(self, model, weight_decay):
        return decay_mxnet_style(model, weight_decay)  # MXNet decays *_weight, never *_bias (no BN here)
