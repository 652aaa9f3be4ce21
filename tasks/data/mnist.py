"""MNIST and Fashion-MNIST through torchvision's datasets and their standard IDX files.

MNIST is provisioned into ``<root>/MNIST/raw`` (where torchvision looks) from, in this order: files already
there, the local mirror (``$COMMBENCH_DATA_MIRROR/mnist/*.gz``, :mod:`commbench.tasks.data.mirror`), or torchvision's
download when the machine is online. Whatever the source, the four uncompressed files must have LeCun's
canonical MD5s (a mismatch is an error naming the file), and ``PROVENANCE.json`` beside them keeps the source
and the checksums for every record. Fashion-MNIST, the same format with other pictures, is the offline
stand-in: when ``<root>/FashionMNIST/raw`` lacks the files, they are provisioned from Debian's
``dataset-fashion-mnist`` package (or from ``.gz`` files placed in ``<root>``) by unpacking them there.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path


from .base import DataUnavailable, InMemoryData, download_failure
from .mirror import (MIRROR_ENV as MIRROR_ENV_NAME, OFFLINE_ENV, downloads_allowed, md5_of, mirror_folder,
                     mirror_hint, stamp, write_json_atomic)

DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
             "t10k-labels-idx1-ubyte")
TRAIN_SIZE = 60_000
# LeCun's MNIST, uncompressed (the values torchvision's own check and every MNIST mirror agree on)
MNIST_MD5 = {"train-images-idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
             "train-labels-idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
             "t10k-images-idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
             "t10k-labels-idx1-ubyte": "27ae3e4e09519cfbb04c329615203637"}
OFFLINE_HINT = "--dataset fashion-mnist is the offline stand-in"


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


def _check_md5(raw: Path, verify: str) -> dict[str, str]:
    """The four files' MD5s; with ``verify="md5"`` each must be the canonical one."""
    sums = {name: md5_of(raw / name) for name in IDX_FILES}
    if verify == "md5":
        for name, md5 in sums.items():
            if md5 != MNIST_MD5[name]:
                raise DataUnavailable(f"mnist: {raw / name} has MD5 {md5}, not MNIST's {MNIST_MD5[name]} "
                                      f"(a corrupted or different file: delete it and provision again)")
    return sums


def provision_mnist(root: Path, download: bool = True, verify: str = "md5") -> dict:
    """Make sure ``<root>/MNIST/raw`` holds MNIST's four files with their canonical MD5s; return the provenance
    (source, checksums). ``verify="structure"``: any files in the IDX format (tests write their own)."""
    if verify not in ("md5", "structure"):
        raise ValueError(f"verify={verify!r}: expected 'md5' or 'structure'")
    raw = Path(root) / "MNIST" / "raw"
    record = raw / "PROVENANCE.json"
    files = [raw / f for f in IDX_FILES]
    if all(p.exists() for p in files):
        if record.exists():
            known = json.loads(record.read_text())
            if known.get("stamp") == stamp(files) and (verify == "structure" or known.get("verified") == "md5"):
                return {k: v for k, v in known.items() if k != "stamp"}
        source = f"files found in {raw}"
    else:
        mirror = mirror_folder("mnist")
        if mirror is not None and all((mirror / f"{f}.gz").exists() for f in IDX_FILES):
            raw.mkdir(parents=True, exist_ok=True)
            for name in IDX_FILES:
                _unpack(mirror / f"{name}.gz", raw / name)
            source = f"local mirror {mirror} ({MIRROR_ENV_NAME})"
        elif download and downloads_allowed():
            from torchvision import datasets

            made = [p for p in (Path(root), Path(root) / "MNIST", raw) if not p.exists()]
            try:
                datasets.MNIST(str(root), train=True, download=True)
            except Exception as exc:  # torchvision raises RuntimeError or URLError offline
                for folder in reversed(made):  # leave no empty folders behind
                    if folder.is_dir() and not any(folder.iterdir()):
                        folder.rmdir()
                why = download_failure(exc)
                raise DataUnavailable(f"mnist: not in {raw}, no mirror ({mirror_hint('mnist')}) and the download "
                                      f"failed ({why}); {OFFLINE_HINT}") from exc
            source = "torchvision download (" + ", ".join(datasets.MNIST.mirrors) + ")"
        else:
            why = "downloading is off" if not download else f"downloading is off ({OFFLINE_ENV}=1)"
            raise DataUnavailable(f"mnist: not in {raw}, no mirror ({mirror_hint('mnist')}) and {why}; "
                                  f"{OFFLINE_HINT}")
    try:
        sums = _check_md5(raw, verify)
    except DataUnavailable:
        if not source.startswith("files found"):  # never leave files that failed the check where they look usable
            for p in files:
                p.unlink(missing_ok=True)
        raise
    provenance = {"source": source, "path": str(raw), "md5": sums, "verified": verify}
    write_json_atomic(record, {**provenance, "stamp": stamp(files)})
    return provenance


def _scale(kind: str):
    if kind == "pm1":  # TernGrad's lenet_preprocessing: x/255 in [0,1], then (x - 0.5) * 2
        return lambda x: (x.float().unsqueeze(1) / 255.0 - 0.5) * 2.0
    if kind == "caffe":  # Caffe's lenet: scale 0.00390625
        return lambda x: x.float().unsqueeze(1) * 0.00390625
    raise ValueError(f"unknown MNIST scaling {kind!r}")


def load_mnist_format(name: str, root: Path, scaling: str = "pm1", *, download: bool = True,
                      verify: str = "md5") -> InMemoryData:
    """``name`` is ``mnist`` or ``fashion-mnist``; evaluation uses the 10,000-image test split. No augmentation
    (TernGrad's lenet_preprocessing has none): a sample's input is a fixed function of its pixels. ``verify``
    (MNIST): ``md5`` (the canonical files) or ``structure`` (any IDX files: generated test data)."""
    from torchvision import datasets

    if name == "fashion-mnist":
        known = {"source": provision_fashion_mnist(root)}
        cls = datasets.FashionMNIST
    elif name == "mnist":
        known, cls = provision_mnist(root, download, verify), datasets.MNIST
    else:
        raise ValueError(name)
    try:
        train = cls(str(root), train=True, download=False)
        test = cls(str(root), train=False, download=False)
    except Exception as exc:  # torchvision raises RuntimeError on files it cannot read
        raise DataUnavailable(f"{name}: the files under {root} could not be read: "
                              f"{str(exc).splitlines()[0]}") from exc
    return InMemoryData(
        name=name, train_x=train.data, train_y=train.targets.long(), eval_x=test.data,
        eval_y=test.targets.long(), num_classes=10, transform=_scale(scaling), input_shape=(1, 28, 28),
        provenance={"root": str(root), "path": train.raw_folder, **known, "format": "IDX via torchvision",
                    "eval_split": "test", "synthetic": False, "scaling": scaling,
                    "train_samples": len(train), "eval_samples": len(test)},
    )
