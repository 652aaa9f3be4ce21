"""Loader speed: the time to produce one worker's batch against the time of one training step it feeds.

- lenet-mnist: Fashion-MNIST (provisioned from Debian's package), 32 per worker, LeNet (tf), momentum SGD.
- lenet-synthetic: the same with the lazy synthetic set (every sample generated when asked for).
- cifarnet-cifar10: CIFAR-10 in its real on-disk format (five pickled training batches of 10,000 random
  images, written here) with the ``cifarnet`` augmentation (crop, flip, brightness, contrast,
  standardisation), 64 per worker, CifarNet, Adam (TernGrad's recipe).
- imagenet-folder (for reading, no ratio): JPEGs of ImageNet's typical size (500 x 375) through the DataLoader
  path, ``caffe`` augmentation, 32 per batch, with 0 and 2 loader workers: images/s.

Batches come from ``train_stream`` over the loop's ``GlobalBatches``, exactly as ``commbench.run.train`` reads them,
in this process; compute uses each worker's share of the cores as ``commbench.run.devices.set_threads`` gives 2 local
workers. Both are medians over ``STEPS`` after a warm-up. The ratio loader_time / step_time should be well
below 1: the loader is then not what limits a run. Reported, not asserted; results land in
``results/benchmarks/loader.json``. Run with ``python -m pytest -m benchmark tests/benchmarks/test_loader_speed.py -s``.
"""
from __future__ import annotations

import os
import pickle
import statistics
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from . import write_result
from commbench.run.train import GlobalBatches
from commbench.tasks.data import load_cifar10, load_imagenet_folder, load_mnist_format, make_synthetic
from commbench.tasks.models import LeNet
from commbench.tasks.models.cifarnet import CifarNet


STEPS, WARMUP, WORKERS = 100, 10, 2
RESULTS: dict[str, dict] = {}


@pytest.fixture(scope="module", autouse=True)
def harness_threads_and_report():
    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // WORKERS))
    yield
    torch.set_num_threads(threads)
    if RESULTS:
        out = {"threads_per_worker": max(1, (os.cpu_count() or 1) // WORKERS), "cpu_count": os.cpu_count(),
               "steps": STEPS, "torch": torch.__version__, "results": RESULTS}
        write_result("loader", out)
        print()
        for name, r in RESULTS.items():
            if "ratio_loader_over_step" in r:
                print(f"{name:18s} loader {r['loader_ms']:7.3f} ms  step {r['step_ms']:7.2f} ms  "
                      f"ratio {r['ratio_loader_over_step']:.4f}")
            else:
                print(f"{name:18s} " + "  ".join(f"{k} {v:.1f}" for k, v in r.items() if isinstance(v, float)))


def median_ms(fn, steps=STEPS, warmup=WARMUP) -> float:
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        fn()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def measure(name, data, model, optimizer, per_worker, extra=None):
    """One worker's stream (rank 0 of 2), then training steps on batches from it."""
    batches = GlobalBatches(data.train_size, per_worker * WORKERS, seed=1)
    total = WARMUP + STEPS
    stream = data.train_stream(((s, batches.indices(s)[:per_worker]) for s in range(2 * total)), 1)
    loader_ms = median_ms(lambda: next(stream))
    x, y = next(stream)

    def step():
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        optimizer.step()

    step_ms = median_ms(step)
    RESULTS[name] = {"per_worker_batch": per_worker, "input_shape": list(data.input_shape),
                     "loader_ms": loader_ms, "step_ms": step_ms, "ratio_loader_over_step": loader_ms / step_ms,
                     **(extra or {})}


@pytest.mark.benchmark
def test_lenet_fashion_mnist(data_root):
    data = load_mnist_format("fashion-mnist", data_root)
    torch.manual_seed(0)
    model = LeNet("tf")
    measure("lenet-mnist", data, model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9), 32,
            {"data": "Fashion-MNIST (IDX via torchvision), no augmentation"})


@pytest.mark.benchmark
def test_lenet_lazy_synthetic():
    from commbench.tasks.lenet_mnist import SYNTHETIC_EVAL, SYNTHETIC_TRAIN

    data = make_synthetic((1, 28, 28), 10, SYNTHETIC_TRAIN, SYNTHETIC_EVAL)
    torch.manual_seed(0)
    model = LeNet("tf")
    measure("lenet-synthetic", data, model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9), 32,
            {"data": "lazy synthetic 1x28x28, each sample generated on demand"})


def write_cifar_like(root, per_batch=10_000):
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name, n in [*((f"data_batch_{i}", per_batch) for i in range(1, 6)), ("test_batch", 1_000)]:
        entry = {b"batch_label": name.encode(), b"labels": rng.integers(0, 10, n).tolist(),
                 b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                 b"filenames": [f"{i}.png".encode() for i in range(n)]}
        (folder / name).write_bytes(pickle.dumps(entry))
    (folder / "batches.meta").write_bytes(pickle.dumps({b"label_names": [f"c{i}".encode() for i in range(10)]}))


@pytest.mark.benchmark
def test_cifarnet_cifar10(tmp_path):
    write_cifar_like(tmp_path)
    t0 = time.perf_counter()
    data = load_cifar10(tmp_path, "cifarnet", verify="structure")
    load_s = time.perf_counter() - t0
    torch.manual_seed(0)
    model = CifarNet(10)
    measure("cifarnet-cifar10", data, model, torch.optim.Adam(model.parameters(), lr=2e-4), 64,
            {"data": "CIFAR-10 format, 50,000 generated images; cifarnet augmentation", "load_s": load_s})


@pytest.mark.benchmark
def test_imagenet_folder_throughput(tmp_path):
    rng = np.random.default_rng(0)
    for c in range(4):
        folder = tmp_path / "imagenet" / "train" / f"n{c:08d}"
        folder.mkdir(parents=True)
        (tmp_path / "imagenet" / "val" / f"n{c:08d}").mkdir(parents=True)
        for k in range(32):
            coarse = rng.integers(0, 256, (25, 33, 3), dtype=np.uint8)
            Image.fromarray(coarse).resize((500, 375), Image.Resampling.BICUBIC).save(folder / f"{k}.JPEG")
        Image.fromarray(coarse).save(tmp_path / "imagenet" / "val" / f"n{c:08d}" / "v.JPEG")
    data = load_imagenet_folder(tmp_path, "caffe", 224)
    batches = GlobalBatches(data.train_size, 32, seed=1)
    result = {}
    for workers in (0, 2):
        steps = 12
        stream = data.train_stream(((s, batches.indices(s)) for s in range(steps + 2)), 1, num_workers=workers)
        next(stream)  # start-up (worker processes) apart
        t0 = time.perf_counter()
        for _ in range(steps):
            next(stream)
        result[f"images_per_s_{workers}_workers"] = steps * 32 / (time.perf_counter() - t0)
        stream.close()
    RESULTS["imagenet-folder"] = {"data": "500x375 JPEGs, caffe augmentation (resize 256x256, crop 224)",
                                  "batch": 32, **result}
