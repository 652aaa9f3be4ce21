"""AlexNet with batch normalization on ImageNet: TernGrad Sec. 4.2 and Table 2 (official slim alexnet)."""
from __future__ import annotations

from .families import IMAGENET_TRAIN, ImageNetTask, decay_weights_only, epochs_to_steps
from .models.alexnet import AlexNetBN
from .recipe import Cited, assumed, probe_tiers, terngrad_official

TABLE = "TernGrad Table 2"
SCRIPT = "terngrad run_multi_gpus_alexnet.sh"


def _row(workers: int, lr: float, batch: int, iterations: int) -> dict:
    return {
        "workers": Cited(workers, f"{TABLE}: {workers} workers"),
        "global_batch": Cited(batch, f"{TABLE}: mini-batch {batch} (128 per worker, Sec. 4.2)"),
        "steps": Cited(iterations, f"{TABLE}: {iterations:,} iterations"),
        "lr_schedule.base_lr": Cited(lr, f"{TABLE}: base LR {lr}"),
        "optimizer.name": Cited("momentum", "TernGrad Sec. 4.2: momentum SGD"),
        "optimizer.momentum": Cited(0.9, f"{SCRIPT}: momentum 0.9 (Caffe's AlexNet solver)"),
        # Caffe's solver steps x0.1 every 100K iterations at batch 256; the official script every 20 epochs.
        "lr_schedule.kind": Cited("step", f"{SCRIPT}: exponential staircase decay, NUM_EPOCHS_PER_DECAY=20"),
        "lr_schedule.gamma": Cited(0.1, f"{SCRIPT}: decay factor 0.1"),
        "lr_schedule.step_size": Cited(epochs_to_steps(20, IMAGENET_TRAIN, batch), f"{SCRIPT}: every 20 epochs"),
        "weight_decay": Cited(5e-4, f"{TABLE}: weight decay 0.0005"),
        "model.dropout": Cited(0.5, f"{TABLE}: dropout ratio 0.5 for floating gradients"),
        "ema": Cited(0.9999, "official inception_model.py MOVING_AVERAGE_DECAY; RESTORE_AVG_VAR=True"),
        "eval.batch_size": assumed(250, "evaluation batch does not change results; 50,000 / 250 batches"),
    }


class AlexNetImageNet(ImageNetTask):
    name = "alexnet-imagenet"
    summary = "AlexNet with BN on ImageNet (TernGrad Sec. 4.2, Table 2)"
    model_name = "AlexNet-BN (TernGrad slim: two towers, BN on convs, no BN on fc)"
    variants = ("tf",)
    augment = "caffe"  # official distort_alexnet_image: resize 256x256, random 224 crop, flip, mean subtraction
    recipes = {
        "2-workers": _row(2, 0.01, 256, 370_000),
        "4-workers": _row(4, 0.02, 512, 185_000),
        "8-workers": _row(8, 0.04, 1024, 92_500),
    }
    method_defaults = {
        "terngrad": {  # Table 2's TernGrad-noclip row: --set method.clip=0
            "model.dropout": Cited(0.2, f"{TABLE}: dropout ratio 0.2 for TernGrad"),
            **terngrad_official(
                SCRIPT, float_last_layer=Cited(True, "TernGrad Sec. 4.2 (3): no ternarizing in the last layer"),
                min_size=Cited(9217, f"{SCRIPT}: SIZE_TO_BINARIZE=9217 (biases stay float)")),
        },
        "ssdsgd": {
            "method.local_lr_scale": Cited(4.0, "SSD-SGD alex.sh: lr 0.4, lr-local 1.6"),
            "optimizer.momentum_form": Cited("lr_inside", "SSD-SGD trains in MXNet: sgd_mom_update, "
                                                          "mom = m mom - lr (g + wd w); w += mom"),
        },
    }
    tiers = probe_tiers(cpu_steps=200, cpu_batch=16)

    def build_model(self, variant, num_classes, dropout=0.5):
        return AlexNetBN(num_classes, dropout=dropout)

    def weight_decay_map(self, model, weight_decay):
        return decay_weights_only(model, weight_decay)  # slim: conv and fc weights; BN betas and biases not
