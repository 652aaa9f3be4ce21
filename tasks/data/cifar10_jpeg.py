"""``cifar10-jpeg``: the 60,000 CIFAR-10 images and labels, re-encoded as JPEG by a third party. A stand-in for
``cifar10``, never the canonical set: every record says ``substitute_for: cifar10``.

Source, in this order: a JPEG tree ``<root>/cifar10-jpeg/{train,test}/<class>/*.jpg``; the archive
``cifar10-jpeg.tar.gz`` in ``<root>`` or in the local mirror (``$COMMBENCH_DATA_MIRROR/cifar10-jpeg/``),
checked against its MD5 and read in place (no 60,000 small files on disk). Class folders in alphabetical order
are CIFAR-10's label order; every class must hold 5,000 training and 1,000 test images of 32 x 32 pixels.

The images are decoded once into ``<root>/cifar10-jpeg/decoded/`` (uint8 arrays N x 3 x 32 x 32, in class
then file-name order), so that no epoch decodes a JPEG again. JPEG decoders may differ in their last bits, so
the provenance names the decoder and the MD5 of the decoded arrays.

What differs from ``cifar10`` (measured on the decoded training split, 0-255 scale, Pillow with libjpeg-turbo):
channel means 125.269, 122.933, 113.863 against the canonical 125.307, 122.950, 113.865 (within 0.04);
standard deviations 62.53, 61.91, 66.46 against 62.99, 62.09, 66.70 (0.3-0.7% lower: JPEG's quantization
smooths the pictures, and 4:2:0 chroma halves the colour resolution).
"""
from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from .base import DataUnavailable, InMemoryData
from .mirror import md5_of, mirror_folder, mirror_hint, write_json_atomic

NAME = "cifar10-jpeg"
ARCHIVE = "cifar10-jpeg.tar.gz"
ARCHIVE_MD5 = "163cd5da1dd51a584b3b25feb328d988"
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
PER_CLASS = {"train": 5_000, "test": 1_000}
CACHE_VERSION = 1  # bump when the decoded arrays' layout changes


def _from_tree(folder: Path) -> Iterator[tuple[str, str, str, bytes]]:
    for split in PER_CLASS:
        for class_dir in sorted((folder / split).iterdir()):
            if class_dir.is_dir():
                for path in sorted(class_dir.iterdir()):
                    yield split, class_dir.name, path.name, path.read_bytes()


def _from_archive(archive: Path) -> Iterator[tuple[str, str, str, bytes]]:
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            parts = Path(member.name).parts
            parts = parts[1:] if parts and parts[0] in (".", NAME) else parts
            if member.isfile() and len(parts) == 3 and parts[0] in PER_CLASS:
                yield parts[0], parts[1], parts[2], tar.extractfile(member).read()


def _find_source(root: Path) -> tuple[str, Iterator, dict]:
    """(where the images come from, the iterator of (split, class, file, bytes), provenance extras)."""
    tree = root / NAME
    if all((tree / split).is_dir() for split in PER_CLASS):
        return f"JPEG tree {tree}", _from_tree(tree), {}
    candidates = [root / ARCHIVE, tree / ARCHIVE]
    mirror = mirror_folder(NAME)
    if mirror is not None:
        candidates.append(mirror / ARCHIVE)
    for archive in candidates:
        if archive.exists():
            md5 = md5_of(archive)
            if md5 != ARCHIVE_MD5:
                raise DataUnavailable(f"{NAME}: {archive} has MD5 {md5}, not the archive's {ARCHIVE_MD5} "
                                      f"(corrupted, or another file)")
            where = "local mirror " if mirror is not None and archive.parent == mirror else ""
            return f"{where}{archive}", _from_archive(archive), {"archive_md5": md5}
    raise DataUnavailable(f"{NAME}: no JPEG tree in {tree}/{{train,test}} and no {ARCHIVE} in {root}, {tree} or "
                          f"the mirror ({mirror_hint(NAME)}); it is not downloadable: copy {ARCHIVE} into {root}")


def _decode(images: Iterator[tuple[str, str, str, bytes]]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    from PIL import Image

    found: dict[str, dict[str, list[tuple[str, bytes]]]] = {split: {} for split in PER_CLASS}
    for split, label, name, data in images:
        found[split].setdefault(label, []).append((name, data))
    out = {}
    for split, per_class in found.items():
        if tuple(sorted(per_class)) != CLASSES:
            raise DataUnavailable(f"{NAME}: {split}/ has class folders {sorted(per_class)}, not CIFAR-10's "
                                  f"{list(CLASSES)}")
        wrong = {c: len(v) for c, v in per_class.items() if len(v) != PER_CLASS[split]}
        if wrong:
            raise DataUnavailable(f"{NAME}: {split}/ must hold {PER_CLASS[split]} images per class; found "
                                  + ", ".join(f"{c} {n}" for c, n in sorted(wrong.items())))
        x = np.empty((10 * PER_CLASS[split], 3, 32, 32), dtype=np.uint8)
        y = np.repeat(np.arange(10, dtype=np.int64), PER_CLASS[split])
        i = 0
        for label in CLASSES:
            for name, data in sorted(per_class[label]):
                with Image.open(io.BytesIO(data)) as image:
                    if image.size != (32, 32):
                        raise DataUnavailable(f"{NAME}: {split}/{label}/{name} is {image.size[0]} x "
                                              f"{image.size[1]}, not 32 x 32")
                    x[i] = np.asarray(image.convert("RGB")).transpose(2, 0, 1)
                i += 1
        out[split] = (x, y)
    return out


def _decoder() -> str:
    import PIL
    from PIL import features

    turbo = features.version("libjpeg_turbo") if hasattr(features, "version") else None
    return f"Pillow {PIL.__version__}" + (f", libjpeg-turbo {turbo}" if turbo else "")


def provision_cifar10_jpeg(root: Path) -> dict:
    """Decode the images into ``<root>/cifar10-jpeg/decoded/`` unless that is done; return the provenance."""
    import json

    cache = Path(root) / NAME / "decoded"
    manifest = cache / "manifest.json"
    if manifest.exists():
        known = json.loads(manifest.read_text())
        if known.get("cache_version") == CACHE_VERSION and all((cache / f).exists() for f in known["arrays"]):
            return known["provenance"]
    source, images, extra = _find_source(Path(root))
    arrays = _decode(images)
    cache.mkdir(parents=True, exist_ok=True)
    sums = {}
    for split, (x, y) in arrays.items():
        for kind, array in (("x", x), ("y", y)):
            path = cache / f"{split}_{kind}.npy"
            tmp = path.with_name(f"{path.name}.tmp{os.getpid()}.npy")
            np.save(tmp, array)
            os.replace(tmp, path)
            sums[path.name] = md5_of(path)
    train_x = arrays["train"][0].astype(np.float64)
    provenance = {"source": source, **extra, "path": str(cache), "substitute_for": "cifar10",
                  "format": "JPEG (re-encoded CIFAR-10), decoded once", "decoder": _decoder(),
                  "decoded_md5": sums, "classes": list(CLASSES),
                  "channel_mean": [round(float(v), 3) for v in train_x.mean(axis=(0, 2, 3))],
                  "channel_std": [round(float(v), 3) for v in train_x.std(axis=(0, 2, 3))]}
    write_json_atomic(manifest, {"cache_version": CACHE_VERSION, "arrays": sorted(sums), "provenance": provenance})
    return provenance


def load_cifar10_jpeg(root: Path, augment: str) -> InMemoryData:
    """The decoded arrays with a CIFAR-10 augmentation (``cifarnet``, ``resnet32``, ``resnet28``), as
    :func:`commbench.tasks.data.cifar10.load_cifar10` serves the canonical set; evaluation on the 10,000 test images."""
    from .cifar10 import AUGMENTS

    if augment not in AUGMENTS:
        raise ValueError(f"unknown CIFAR-10 augmentation {augment!r}; one of {', '.join(AUGMENTS)}")
    provenance = provision_cifar10_jpeg(root)
    cache = Path(root) / NAME / "decoded"
    load = lambda name: torch.from_numpy(np.load(cache / f"{name}.npy"))  # noqa: E731
    aug = AUGMENTS[augment]()
    train_y, test_y = load("train_y"), load("test_y")
    return InMemoryData(
        name=NAME, train_x=load("train_x"), train_y=train_y.long(), eval_x=load("test_x"), eval_y=test_y.long(),
        num_classes=10, transform=aug.eval, augment=aug, input_shape=aug.input_shape,
        provenance={**provenance, "root": str(root), "eval_split": "test", "synthetic": False, "augment": augment,
                    "train_samples": len(train_y), "eval_samples": len(test_y)},
    )
