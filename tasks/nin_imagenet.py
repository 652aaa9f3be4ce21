"""Network in Network on ImageNet: the threshold paper's (Anoosheh et al.) baseline, Sec. 3.1."""
from __future__ import annotations

from .families import ImageNetTask, decay_weights_only
from .models.nin import NiN
from .recipe import Cited, probe_tiers

PAPER = "Threshold paper Sec. 3.1"


class NiNImageNet(ImageNetTask):
    name = "nin-imagenet"
    summary = "Network in Network on ImageNet (threshold paper Sec. 3.1, Tables 1-3)"
    model_name = "NiN (Caffe model zoo, 4 mlpconv blocks, global average pooling)"
    variants = ("caffe",)
    augment = "caffe"
    recipes = {
        "threshold-paper": {
            "workers": Cited(8, f"{PAPER}: n = 8 simulated nodes"),
            "backend": Cited("sim", f"{PAPER}: the nodes were simulated on one GPU by splitting the batch"),
            "global_batch": Cited(128, f"{PAPER}: batch size 128 (16 per node)"),
            "steps": Cited(220_000, f"{PAPER}: 220,000 iterations"),
            "optimizer.name": Cited("momentum", f"{PAPER}: momentum 0.9"),
            "optimizer.momentum": Cited(0.9, f"{PAPER}: momentum 0.9"),
            "optimizer.momentum_form": Cited("lr_inside", f"{PAPER}: trained in Caffe, whose SGD solver puts lr "
                                                          "inside the momentum: V = m V + lr (g + wd w); W -= V"),
            "lr_schedule.base_lr": Cited(0.01, f"{PAPER}: base learning rate 0.01"),
            "lr_schedule.kind": Cited("step", f"{PAPER}: factor-of-ten reduction every 100,000 iterations"),
            "lr_schedule.gamma": Cited(0.1, f"{PAPER}: factor of ten"),
            "lr_schedule.step_size": Cited(100_000, f"{PAPER}: every 100,000 iterations"),
            "weight_decay": Cited(5e-4, f"{PAPER}: weight decay 0.0005"),
            "model.dropout": Cited(0.5, "Caffe model-zoo NiN prototxt: dropout 0.5 after pool3"),
            "eval.batch_size": Cited(89, "Caffe model-zoo NiN prototxt: val batch 89"),
        },
    }
    tiers = probe_tiers(cpu_steps=200, cpu_batch=16)

    def build_model(self, variant, num_classes, dropout=0.5):
        return NiN(num_classes, dropout=dropout)

    def weight_decay_map(self, model, weight_decay):
        return decay_weights_only(model, weight_decay)  # Caffe NiN: bias decay_mult 0
