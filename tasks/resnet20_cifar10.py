"""ResNet-20 on CIFAR-10: SSD-SGD Table 2 (its MXNet pre-activation variant), He et al.'s option A, and GRACE's
ResNet-20 runs (tf_cnn_benchmarks' resnet20_v2)."""
from __future__ import annotations

from .families import (CIFAR10_TRAIN, Cifar10Task, decay_all_but_batchnorm, decay_everything, decay_mxnet_style,
                       epochs_to_steps)
from .models.resnet_cifar import resnet20
from .recipe import Cited, assumed

SSD = "SSD-SGD"
SCRIPT = "SSD-SGD cifar10-dis.sh"
SSD_BATCH = 512  # 32 per GPU x 4 GPUs per worker x 4 workers
GRACE = "GRACE (Xu et al., ICDCS 2021)"
GRACE_SCRIPT = "sands-lab/grace-benchmarks TF_scripts.sh"
GRACE_DATA = "sands-lab/grace-data GRACE_data_release.pickle (resnet20_v2 runs)"
TF_CNN = "tf_cnn_benchmarks benchmark_cnn.py"
GRACE_BATCH = 2048  # 256 per GPU x 8 V100s, one GPU per Horovod worker
GRACE_EPOCH_STEPS = CIFAR10_TRAIN / GRACE_BATCH  # num_batches_per_epoch (examples per step = batch x workers)


class ResNet20CIFAR10(Cifar10Task):
    name = "resnet20-cifar10"
    summary = "ResNet-20 on CIFAR-10 (SSD-SGD Sec. 4.3, Table 2, Fig. 4; He et al. 2016)"
    model_name = "ResNet-20 (SSD-SGD: pre-activation, projection shortcuts; He et al.: option A)"
    variants = ("preact-projection", "option-a", "preact-option-a")
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
        "grace": {
            "model.variant": Cited("preact-option-a", f"{GRACE_SCRIPT}: --model=resnet20_v2 (tf_cnn_benchmarks "
                                                      "models/resnet_model.py ResnetCifar10Model v2)"),
            "workers": Cited(8, f"{GRACE_DATA}: workers 8, gpu_type v100"),
            "global_batch": Cited(GRACE_BATCH, f"{GRACE_SCRIPT}: --batch_size=256 per GPU; 8 workers"),
            "optimizer.name": Cited("momentum", f"{GRACE_DATA}: optimizer momentum for both the baseline and "
                                                "TernGrad (the script's template says sgd)"),
            "optimizer.momentum": Cited(0.9, f"{TF_CNN} --momentum default 0.9"),
            "optimizer.nesterov": Cited(True, f"{TF_CNN} get_optimizer: MomentumOptimizer(use_nesterov=True)"),
            "lr_schedule.base_lr": Cited(0.1, f"{GRACE_SCRIPT}: --piecewise_learning_rate_schedule='0.1;163;0.01;"
                                              "245;0.001' (not scaled with workers, no warm-up)"),
            "lr_schedule.kind": Cited("multistep", f"{GRACE_SCRIPT}: piecewise, /10 at epochs 163 and 245"),
            "lr_schedule.gamma": Cited(0.1, f"{GRACE_SCRIPT}: 0.1 -> 0.01 -> 0.001"),
            # TF's boundary int(epoch x batches per epoch) - 1 is the last step at the old rate (piecewise_constant:
            # values[i] while global_step <= boundaries[i]); here the milestone is the first step at the new one
            "lr_schedule.milestones": Cited([int(e * GRACE_EPOCH_STEPS) for e in (163, 245)],
                                            f"{TF_CNN} get_piecewise_learning_rate: int(epoch x 50,000 / 2,048) - 1"),
            "steps": Cited(8018, f"{GRACE_DATA}: step 8018 (328 epochs: 8,008 batches, plus 10 warm-up batches)"),
            "weight_decay": Cited(1e-4, f"{GRACE_SCRIPT}: --weight_decay=0.0001, added to the loss over the "
                                        "variables without 'batchnorm' in their name"),
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
        # SSD-SGD's train_cifar10.py trains on 28x28 crops (image_shape 3,28,28); He et al. and tf_cnn_benchmarks
        # on 32x32, each with its own scaling
        return {"preact-projection": "resnet28", "preact-option-a": "tf-resnet32"}.get(variant, "resnet32")

    def build_model(self, variant, num_classes, **options):
        if options:
            raise ValueError(f"model options {sorted(options)}: ResNet-20 has none")
        model = resnet20(variant, num_classes)
        model.variant = variant  # the weight-decay convention follows the variant's reference code
        return model

    def weight_decay_map(self, model, weight_decay):
        variant = getattr(model, "variant", None)
        if variant == "option-a":
            return decay_everything(model, weight_decay)  # the PyTorch reference's SGD(weight_decay=...)
        if variant == "preact-option-a":
            return decay_all_but_batchnorm(model, weight_decay)  # tf_cnn_benchmarks' L2 loss
        return decay_mxnet_style(model, weight_decay)
