"""CIFAR-10 from its standard on-disk format, with the papers' augmentations vectorised over the batch.

On disk (the "python version" of https://www.cs.toronto.edu/~kriz/cifar.html, as torchvision expects it)::

    <root>/cifar-10-batches-py/data_batch_1 .. data_batch_5   training split, 10,000 images each
    <root>/cifar-10-batches-py/test_batch                     evaluation split, 10,000 images
    <root>/cifar-10-batches-py/batches.meta                   {b"label_names": [10 class names], ...}

Each batch is a pickled dict: ``b"data"`` uint8 N x 3072 (per row the 1024 R, then G, then B values of a
32 x 32 image, row-major), ``b"labels"`` (N ints in 0..9), ``b"batch_label"``, ``b"filenames"``.

``load_cifar10(root, augment)`` reads the official files through torchvision's ``CIFAR10``, which downloads
them when online and checks their md5 sums. Files that are genuinely in this format but not the official ones
(a subset, a re-encoding, generated test files) fail that check by design; ``verify="structure"`` (or
``COMMBENCH_CIFAR_VERIFY=structure``) reads them with this module's own reader instead, which checks the
format (keys, dtypes, shapes, label range) and not the checksums. Provenance records which check was made.

Augmentations (``augment``), training / evaluation:

- ``cifarnet``: TF CIFAR-10 tutorial (``cifar10_input.distorted_inputs``; TernGrad's
  ``image_processing.distort_cifar10_image``): random 24 x 24 crop of the 32 x 32 image, random horizontal
  flip, random brightness (delta uniform in [-63, 63) on the 0-255 scale), random contrast (factor uniform in
  [0.2, 1.8): per channel (x - mean) * f + mean), per-image standardisation ((x - mean) / max(std,
  1/sqrt(numel)), mean and std over the whole image). Evaluation: central 24 x 24 crop + standardisation.
- ``resnet32``: akamaster/pytorch_resnet_cifar10 ``trainer.py`` (He et al.'s CIFAR recipe): pad 4 with zeros,
  random 32 x 32 crop, random flip, then x/255 normalised with ``transforms.Normalize(mean=[0.485, 0.456,
  0.406], std=[0.229, 0.224, 0.225])`` (the ImageNet constants, as that trainer uses). Evaluation: no crop,
  the same normalisation.
- ``resnet28``: SSD-SGD's MXNet ``example/image-classification/train_cifar10.py`` (``image_shape 3,28,28``,
  ``pad_size 4``; ``set_cifar_aug``: ``fill_value 0``, ``random_crop 1``, ``random_mirror 1``, ``rgb_mean
  125.307,122.961,113.8575``, ``rgb_std 51.5865,50.847,51.255``): pad 4 with zeros, random 28 x 28 crop,
  random mirror, (x - mean) / std on the 0-255 scale. Evaluation: central 28 x 28 crop, same normalisation.
- ``tf-resnet32``: tf_cnn_benchmarks' ``Cifar10ImagePreprocessor`` (GRACE's ResNet-20 runs):
  ``resize_image_with_crop_or_pad`` to 40 x 40 (4 zeros each side), random 32 x 32 crop, random flip, then
  x / 127.5 - 1 (no per-channel statistics). Evaluation: the image, the same scaling.

Random choices come from :func:`commbench.tasks.data.rng.sample_uniforms`: a sample's crop, flip, brightness and
contrast depend on (seed, step, sample index) only. Integer choices are ``floor(u * n)``; a flip is ``u < 0.5``.
"""
from __future__ import annotations

import math
import os
import pickle
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from .base import DataUnavailable, InMemoryData, download_failure
from .mirror import downloads_allowed

FOLDER = "cifar-10-batches-py"
TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILE = "test_batch"
META_FILE = "batches.meta"
FILES = (*TRAIN_FILES, TEST_FILE, META_FILE)
URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
VERIFY_ENV = "COMMBENCH_CIFAR_VERIFY"

RESNET32_MEAN, RESNET32_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # akamaster trainer.py (0-1 scale)
RESNET28_MEAN, RESNET28_STD = (125.307, 122.961, 113.8575), (51.5865, 50.847, 51.255)  # SSD-SGD (0-255 scale)
TF_RESNET_SCALE = (127.5, 127.5, 127.5)  # tf_cnn_benchmarks: x / 127.5 - 1 = (x - 127.5) / 127.5


def crop_flip(x: torch.Tensor, top: torch.Tensor, left: torch.Tensor, height: int, width: int,
              flip: torch.Tensor | None = None) -> torch.Tensor:
    """Per-sample crops (and horizontal flips) of a batch N x C x H x W, gathered in one indexing op."""
    n, c = x.shape[:2]
    rows = top[:, None] + torch.arange(height)                        # N x h
    cols = left[:, None] + torch.arange(width)                        # N x w
    if flip is not None:
        cols = torch.where(flip[:, None], cols.flip(1), cols)
    return x[torch.arange(n)[:, None, None, None], torch.arange(c)[None, :, None, None],
             rows[:, None, :, None], cols[:, None, None, :]]


def _choice(u: torch.Tensor, n: int) -> torch.Tensor:
    """floor(u * n) as an index tensor: uniform over 0..n-1."""
    return (u * n).floor().long().clamp_(max=n - 1)


def standardize(x: torch.Tensor) -> torch.Tensor:
    """TF ``per_image_standardization``: (x - mean) / max(std, 1/sqrt(numel)) per image, population std."""
    mean = x.mean(dim=(1, 2, 3), keepdim=True)
    std = x.std(dim=(1, 2, 3), keepdim=True, correction=0)
    return (x - mean) / std.clamp(min=1.0 / math.sqrt(x[0].numel()))


class CifarNetAugment:
    """TF CIFAR-10 tutorial: 24 x 24 crops, flip, brightness 63, contrast [0.2, 1.8], standardisation."""

    draws = 5  # crop top, crop left, flip, brightness, contrast
    crop = 24
    input_shape = (3, 24, 24)

    def train(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        span = x.shape[-1] - self.crop + 1
        x = crop_flip(x, _choice(u[:, 0], span), _choice(u[:, 1], span), self.crop, self.crop, u[:, 2] < 0.5)
        x = x.float()
        x = x + ((u[:, 3] * 2 - 1) * 63).float()[:, None, None, None]      # random_brightness(max_delta=63)
        factor = (0.2 + u[:, 4] * 1.6).float()[:, None, None, None]        # random_contrast(0.2, 1.8)
        mean = x.mean(dim=(2, 3), keepdim=True)
        x = (x - mean) * factor + mean
        return standardize(x)

    def eval(self, x: torch.Tensor) -> torch.Tensor:
        off = (x.shape[-1] - self.crop) // 2
        return standardize(x[:, :, off:off + self.crop, off:off + self.crop].float())


class PadCropAugment:
    """Zero-pad 4, random crop, random flip, per-channel normalisation; evaluation crops the centre."""

    draws = 3  # crop top, crop left, flip

    def __init__(self, crop: int, mean: tuple[float, ...], std: tuple[float, ...], scale: float):
        self.crop, self.scale = crop, scale
        self.mean = torch.tensor(mean, dtype=torch.float32)[None, :, None, None]
        self.std = torch.tensor(std, dtype=torch.float32)[None, :, None, None]
        self.input_shape = (3, crop, crop)

    def _normalize(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float()
        if self.scale != 1.0:
            x = x.div(self.scale)  # torchvision ToTensor: x / 255
        return (x - self.mean) / self.std

    def train(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        x = F.pad(x, (4, 4, 4, 4))  # zeros: black, before normalisation (PIL fill 0; MXNet fill_value 0)
        span = x.shape[-1] - self.crop + 1
        return self._normalize(crop_flip(x, _choice(u[:, 0], span), _choice(u[:, 1], span), self.crop,
                                         self.crop, u[:, 2] < 0.5))

    def eval(self, x: torch.Tensor) -> torch.Tensor:
        off = (x.shape[-1] - self.crop) // 2
        return self._normalize(x[:, :, off:off + self.crop, off:off + self.crop])


AUGMENTS = {
    "cifarnet": CifarNetAugment,
    "resnet32": lambda: PadCropAugment(32, RESNET32_MEAN, RESNET32_STD, scale=255.0),
    "resnet28": lambda: PadCropAugment(28, RESNET28_MEAN, RESNET28_STD, scale=1.0),
    "tf-resnet32": lambda: PadCropAugment(32, TF_RESNET_SCALE, TF_RESNET_SCALE, scale=1.0),
}


# --- reading the pickles ------------------------------------------------------------------------------------

class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles CIFAR batches (dicts of numpy arrays, lists, bytes) and refuses any other global."""

    ALLOWED = {("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")} | {
        (f"numpy.{core}.{mod}", name) for core in ("core", "_core")
        for mod, name in (("multiarray", "_reconstruct"), ("multiarray", "scalar"), ("numeric", "_frombuffer"))}

    def find_class(self, module, name):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"unexpected global {module}.{name} in a CIFAR-10 pickle")
        if module.startswith("numpy.core."):  # pickles made by numpy 1.x name numpy.core, numpy 2 _core
            module = "numpy._core." + module[len("numpy.core."):]
        return super().find_class(module, name)


def _unpickle(path: Path) -> dict:
    with open(path, "rb") as f:
        entry = _ArrayUnpickler(f, encoding="bytes").load()  # the official Python 2 pickles: str keys -> bytes
    if not isinstance(entry, dict):
        raise ValueError(f"{path}: a {type(entry).__name__}, not a dict")
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in entry.items()}


def _read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One batch file's images (N x 3 x 32 x 32 uint8) and labels, after checking the format."""
    entry = _unpickle(path)
    missing = {"data", "labels", "batch_label", "filenames"} - set(entry)
    if missing:
        raise ValueError(f"{path}: keys {sorted(missing)} missing (has {sorted(entry)})")
    data, labels = entry["data"], np.asarray(entry["labels"])
    if not (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 2 and data.shape[1] == 3072):
        raise ValueError(f"{path}: b'data' must be uint8 N x 3072, got {getattr(data, 'dtype', type(data))} "
                         f"{getattr(data, 'shape', '')}")
    if labels.shape != (len(data),) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"{path}: b'labels' must be {len(data)} integers, got {labels.dtype} {labels.shape}")
    if len(labels) and (labels.min() < 0 or labels.max() > 9):
        raise ValueError(f"{path}: labels outside 0..9")
    if len(entry["filenames"]) != len(data):
        raise ValueError(f"{path}: {len(entry['filenames'])} filenames for {len(data)} images")
    return data.reshape(-1, 3, 32, 32), labels.astype(np.int64)


def _read_structure(folder: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
    parts = [_read_batch(folder / f) for f in TRAIN_FILES]
    test_x, test_y = _read_batch(folder / TEST_FILE)
    meta = _unpickle(folder / META_FILE)
    names = meta.get("label_names")
    if names is None or len(names) != 10:
        raise ValueError(f"{folder / META_FILE}: b'label_names' must list 10 class names")
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in names]
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), test_x, test_y, names)


def _where_to_put(root: Path) -> str:
    return (f"put the official CIFAR-10 python version there: fetch {URL} elsewhere and run "
            f"`tar xzf cifar-10-python.tar.gz -C {root}`, which creates {Path(root) / FOLDER}/ with "
            f"{', '.join(FILES)}")


def _torchvision_cifar10(root: Path, download: bool):
    """torchvision's train and test sets (md5-checked), downloading first when files are missing."""
    from torchvision.datasets import CIFAR10

    folder = root / FOLDER
    missing = [f for f in FILES if not (folder / f).exists()]
    download = download and downloads_allowed()
    try:
        train = CIFAR10(str(root), train=True, download=download and bool(missing))
        return train, CIFAR10(str(root), train=False)
    except Exception as exc:  # torchvision raises RuntimeError (bad or no files) or URLError (offline)
        if not missing:
            raise DataUnavailable(
                f"cifar10: the files in {folder} fail torchvision's md5 check against the official release "
                f"(corrupted, or not the official files). Re-fetch them; or, to read genuinely formatted "
                f"non-official files, set {VERIFY_ENV}=structure (load_cifar10(..., verify='structure'))") from exc
        why = download_failure(exc)
        raise DataUnavailable(f"cifar10: {folder} lacks {', '.join(missing)} and "
                              f"{'the download failed (' + why + ')' if download else 'downloading is off'}; "
                              f"{_where_to_put(root)}") from exc


def provision_cifar10(root: Path, download: bool = True) -> str:
    """Make sure the official files are under ``root`` (torchvision downloads and md5-checks them); return
    their source. For a task's ``prepare_data``, so that concurrent workers never download at once."""
    _torchvision_cifar10(Path(root), download)
    return f"torchvision CIFAR10 ({URL}), md5-checked"


def load_cifar10(root: Path, augment: str, *, verify: str | None = None, download: bool = True) -> InMemoryData:
    """CIFAR-10 under ``root/cifar-10-batches-py`` with augmentation ``augment`` (cifarnet, resnet32,
    resnet28); evaluation on ``test_batch``. ``verify``: ``md5`` (default; official files through
    torchvision, downloaded if missing and ``download``) or ``structure`` (any file in the format)."""
    if augment not in AUGMENTS:
        raise ValueError(f"unknown CIFAR-10 augmentation {augment!r}; one of {', '.join(AUGMENTS)}")
    verify = verify or os.environ.get(VERIFY_ENV, "").strip() or "md5"
    root, folder = Path(root), Path(root) / FOLDER
    if verify == "md5":
        train, test = _torchvision_cifar10(root, download)
        source = f"torchvision CIFAR10 ({URL}), md5-checked"
        train_x, train_y = train.data.transpose(0, 3, 1, 2), np.asarray(train.targets)  # torchvision keeps HWC
        test_x, test_y, names = test.data.transpose(0, 3, 1, 2), np.asarray(test.targets), list(train.classes)
    elif verify == "structure":
        missing = [f for f in FILES if not (folder / f).exists()]
        if missing:
            raise DataUnavailable(f"cifar10: {folder} lacks {', '.join(missing)}; {_where_to_put(root)}")
        try:
            train_x, train_y, test_x, test_y, names = _read_structure(folder)
        except (ValueError, pickle.UnpicklingError, EOFError) as exc:
            raise DataUnavailable(f"cifar10: {folder} is not in the CIFAR-10 python format: {exc}") from exc
        source = f"CIFAR-10 python pickles in {folder}, format checked, md5 not checked (verify=structure)"
    else:
        raise ValueError(f"verify={verify!r}: expected 'md5' or 'structure'")
    aug = AUGMENTS[augment]()
    as_tensor = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
    return InMemoryData(
        name="cifar10", train_x=as_tensor(train_x), train_y=as_tensor(train_y).long(), eval_x=as_tensor(test_x),
        eval_y=as_tensor(test_y).long(), num_classes=10, transform=aug.eval, augment=aug,
        input_shape=aug.input_shape,
        provenance={"source": source, "url": URL, "path": str(folder), "root": str(root),
                    "format": "CIFAR-10 python pickles", "verified": verify, "eval_split": "test_batch",
                    "synthetic": False, "augment": augment, "classes": names,
                    "train_samples": len(train_y), "eval_samples": len(test_y)},
    )
