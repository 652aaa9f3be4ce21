"""MNIST and Fashion-MNIST through torchvision's datasets and their standard IDX files.

MNIST is downloaded by torchvision when the machine is online. Fashion-MNIST, the same format with other
pictures, is the offline stand-in: when ``<root>/FashionMNIST/raw`` lacks the files, they are provisioned
from Debian's ``dataset-fashion-mnist`` package (or from ``.gz`` files placed in ``<root>``) by unpacking
them where torchvision looks.
"""
from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path


from .base import DataUnavailable, InMemoryData

DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
             "t10k-labels-idx1-ubyte")
TRAIN_SIZE = 60_000


def _unpack(src: Path, dst: Path) -> None:
    tmp = dst.with_name(dst.name + f".tmp{os.getpid()}")
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rb") as fin, open(tmp, "wb") as fout:
        shutil.copyfileobj(fin, fout)
    os.replace(tmp, dst)  # atomic: concurrent provisioners never see half a file


def provision_fashion_mnist(root: Path) -> str:
    """Make sure torchvision finds Fashion-MNIST under ``root``; return where the files came from."""
    raw = root / "FashionMNIST" / "raw"
    marker = raw / "PROVENANCE"
    if all((raw / f).exists() for f in IDX_FILES):
        return marker.read_text().strip() if marker.exists() else str(raw)
    for source in (raw, root, DEBIAN_FASHION_MNIST):
        found = {f: next((p for p in (source / f, source / f"{f}.gz") if p.exists()), None) for f in IDX_FILES}
        if all(found.values()):
            raw.mkdir(parents=True, exist_ok=True)
            for name, path in found.items():
                if not (raw / name).exists():
                    _unpack(path, raw / name)
            origin = f"{source}" + (" (Debian package dataset-fashion-mnist)" if source == DEBIAN_FASHION_MNIST else "")
            if source != raw:
                marker.write_text(origin + "\n")
            return origin
    raise DataUnavailable(
        f"fashion-mnist: IDX files not found in {raw}, {root} or {DEBIAN_FASHION_MNIST}; "
        "install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or pass --data-root"
    )


def _scale(kind: str):
    if kind == "pm1":  # TernGrad's lenet_preprocessing: x/255 in [0,1], then (x - 0.5) * 2
        return lambda x: (x.float().unsqueeze(1) / 255.0 - 0.5) * 2.0
    if kind == "caffe":  # Caffe's lenet: scale 0.00390625
        return lambda x: x.float().unsqueeze(1) * 0.00390625
    raise ValueError(f"unknown MNIST scaling {kind!r}")


def load_mnist_format(name: str, root: Path, scaling: str = "pm1") -> InMemoryData:
    """``name`` is ``mnist`` or ``fashion-mnist``; evaluation uses the 10,000-image test split. No augmentation
    (TernGrad's lenet_preprocessing has none): a sample's input is a fixed function of its pixels."""
    from torchvision import datasets

    if name == "fashion-mnist":
        origin = provision_fashion_mnist(root)
        cls, download = datasets.FashionMNIST, False
    elif name == "mnist":
        origin, cls, download = "torchvision download (yann.lecun.com mirrors)", datasets.MNIST, True
    else:
        raise ValueError(name)
    try:
        train = cls(str(root), train=True, download=download)
        test = cls(str(root), train=False, download=download)
    except Exception as exc:  # torchvision raises RuntimeError or URLError offline
        hint = " (offline? --dataset fashion-mnist is the offline stand-in)" if name == "mnist" else ""
        raise DataUnavailable(f"{name}: not under {root} and could not be fetched: "
                              f"{str(exc).splitlines()[0]}{hint}") from exc
    return InMemoryData(
        name=name, train_x=train.data, train_y=train.targets.long(), eval_x=test.data,
        eval_y=test.targets.long(), num_classes=10, transform=_scale(scaling), input_shape=(1, 28, 28),
        provenance={"source": origin, "root": str(root), "path": train.raw_folder, "format": "IDX via torchvision",
                    "eval_split": "test", "synthetic": False, "scaling": scaling,
                    "train_samples": len(train), "eval_samples": len(test)},
    )
