"""ImageNet (ILSVRC-2012) from a folder tree of images, read by a torch DataLoader with worker processes.

Layout (torchvision's ``ImageFolder``; ``root`` is ``--data-root``)::

    <root>/imagenet/train/<wnid>/*.JPEG    e.g. train/n01440764/n01440764_10026.JPEG: 1,281,167 images
    <root>/imagenet/val/<wnid>/*.JPEG      the 50,000 validation images, in the same class folders

The class index of an image is the position of its folder name in the sorted list of ``train/`` folders
(1000 wnids: 0..999); ``val/`` uses that same mapping, and a ``val/`` folder that ``train/`` lacks is an error.
The official ``ILSVRC2012_img_val.tar`` is flat (``ILSVRC2012_val_00000001.JPEG`` ...): its images must first
be sorted into class folders. With the three official archives (``ILSVRC2012_img_train.tar``,
``ILSVRC2012_img_val.tar``, ``ILSVRC2012_devkit_t12.tar.gz``) in ``<root>/imagenet``, torchvision does both
splits: ``torchvision.datasets.ImageNet("<root>/imagenet", split="train")`` and ``split="val"`` extract them
into exactly this layout (the val images sorted by the devkit's ground truth). Any extension torchvision
accepts (.jpg, .jpeg, .png, ... any case) is read; images are decoded by PIL and converted to RGB.

Augmentations (``augment``; ``crop`` is the model input size, 224 by default):

- ``caffe`` (Caffe's ImageNet data layer over images stored at 256 x 256 by ``convert_imageset
  --resize_height=256 --resize_width=256``; TernGrad's ``distort_alexnet_image`` does the same): resize to
  256 x 256 (aspect ratio not kept; PIL bilinear, antialiased), random ``crop`` x ``crop`` crop, random mirror,
  pixels kept on the 0-255 scale minus the per-channel ImageNet mean. The mean is Caffe's
  ``ilsvrc_2012_mean`` averaged per channel, B 104.00698793, G 116.66876762, R 122.67891434 (Caffe feeds
  BGR); tensors here are RGB, so R 122.68, G 116.67, B 104.01 are subtracted from channels 0, 1, 2.
  (TernGrad's TF code subtracts the VGG triplet R 123.68, G 116.78, B 103.94, within one grey level.)
  Evaluation: the same resize, central crop.
- ``resnet`` (torchvision's ImageNet reference recipe): ``RandomResizedCrop(crop)`` (scale 0.08-1, ratio
  3/4-4/3, 10 tries, then a central fallback, as torchvision draws them), random flip, x/255 normalised with
  mean (0.485, 0.456, 0.406), std (0.229, 0.224, 0.225). Evaluation: resize the short side to
  ``round(crop * 256 / 224)`` (256 for 224), central ``crop`` crop, the same normalisation.

Random choices come from :func:`commbench.tasks.data.rng.sample_uniforms` with (seed, step, sample index), inside the
loader workers, so neither the number of workers nor which worker loads a sample changes a batch.

Loading: each training stream is a ``DataLoader`` over a batch sampler made from the stream's ``(step,
indices)`` pairs, with ``num_workers`` = ``$COMMBENCH_LOADER_WORKERS`` or min(4, cores), persistent workers,
pinned memory when CUDA is available and ``PREFETCH_BATCHES`` batches per worker read ahead. File lists are
numpy byte arrays, not Python lists, so forked workers do not copy them page by page through refcounts.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from .base import Batch, Data, DataUnavailable, loader_workers
from .rng import sample_uniforms

PREFETCH_BATCHES = 2  # per loader worker
CAFFE_MEAN_RGB = (122.67891434, 116.66876762, 104.00698793)  # Caffe ilsvrc_2012_mean per channel (BGR there)
TORCHVISION_MEAN, TORCHVISION_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
LAYOUT = ("<root>/imagenet/train/<wnid>/*.JPEG and <root>/imagenet/val/<wnid>/*.JPEG (torchvision ImageFolder "
          "layout; the official flat val set must first be sorted into class folders, e.g. by "
          "torchvision.datasets.ImageNet('<root>/imagenet', split='val') with the official archives there)")


def load_image(path: str | os.PathLike) -> Image.Image:
    with open(path, "rb") as f:
        img = Image.open(f)
        return img.convert("RGB")


def _to_tensor(img: Image.Image) -> torch.Tensor:
    """uint8 C x H x W."""
    return torch.from_numpy(np.array(img, dtype=np.uint8)).permute(2, 0, 1).contiguous()


def _pick(u: float, n: int) -> int:
    """floor(u * n): uniform over 0..n-1."""
    return min(int(u * n), n - 1)


class CaffeTransform:
    """Resize to 256 x 256, random crop, mirror, 0-255 minus the per-channel mean."""

    draws = 3  # crop top, crop left, mirror

    def __init__(self, crop: int, resize: int = 256):
        if crop > resize:
            raise ValueError(f"crop {crop} larger than the {resize} x {resize} resized image")
        self.crop, self.resize = crop, resize
        self.mean = torch.tensor(CAFFE_MEAN_RGB, dtype=torch.float32)[:, None, None]

    def _finish(self, img: Image.Image) -> torch.Tensor:
        return _to_tensor(img).float() - self.mean

    def train(self, img: Image.Image, u: list[float]) -> torch.Tensor:
        img = img.resize((self.resize, self.resize), Image.Resampling.BILINEAR)
        span = self.resize - self.crop + 1
        top, left = _pick(u[0], span), _pick(u[1], span)
        img = img.crop((left, top, left + self.crop, top + self.crop))
        if u[2] < 0.5:
            img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        return self._finish(img)

    def eval(self, img: Image.Image) -> torch.Tensor:
        img = img.resize((self.resize, self.resize), Image.Resampling.BILINEAR)
        off = (self.resize - self.crop) // 2
        return self._finish(img.crop((off, off, off + self.crop, off + self.crop)))


class ResNetTransform:
    """torchvision's reference: RandomResizedCrop + flip + normalise; eval resize + central crop."""

    tries, scale, ratio = 10, (0.08, 1.0), (3 / 4, 4 / 3)
    draws = 1 + 4 * 10  # flip, then (area, log-ratio, top, left) per try

    def __init__(self, crop: int):
        self.crop, self.resize = crop, round(crop * 256 / 224)
        self.mean = torch.tensor(TORCHVISION_MEAN, dtype=torch.float32)[:, None, None]
        self.std = torch.tensor(TORCHVISION_STD, dtype=torch.float32)[:, None, None]

    def _finish(self, img: Image.Image) -> torch.Tensor:
        return (_to_tensor(img).float().div(255) - self.mean) / self.std

    def box(self, width: int, height: int, u: list[float]) -> tuple[int, int, int, int]:
        """``RandomResizedCrop.get_params`` with our uniforms: (top, left, height, width)."""
        area = width * height
        log_lo, log_hi = math.log(self.ratio[0]), math.log(self.ratio[1])
        for t in range(self.tries):
            a, r, i, j = u[1 + 4 * t: 5 + 4 * t]
            target = area * (self.scale[0] + a * (self.scale[1] - self.scale[0]))
            aspect = math.exp(log_lo + r * (log_hi - log_lo))
            w, h = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
            if 0 < w <= width and 0 < h <= height:
                return _pick(i, height - h + 1), _pick(j, width - w + 1), h, w
        in_ratio = width / height
        if in_ratio < self.ratio[0]:
            w, h = width, int(round(width / self.ratio[0]))
        elif in_ratio > self.ratio[1]:
            h, w = height, int(round(height * self.ratio[1]))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def train(self, img: Image.Image, u: list[float]) -> torch.Tensor:
        top, left, h, w = self.box(*img.size, u)
        img = img.crop((left, top, left + w, top + h)).resize((self.crop, self.crop), Image.Resampling.BILINEAR)
        if u[0] < 0.5:
            img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        return self._finish(img)

    def eval(self, img: Image.Image) -> torch.Tensor:
        width, height = img.size  # torchvision Resize(int): the short side to ``resize``, the other truncated
        if width <= height:
            size = (self.resize, int(self.resize * height / width))
        else:
            size = (int(self.resize * width / height), self.resize)
        img = img.resize(size, Image.Resampling.BILINEAR)
        top = int(round((size[1] - self.crop) / 2.0))
        left = int(round((size[0] - self.crop) / 2.0))
        return self._finish(img.crop((left, top, left + self.crop, top + self.crop)))


TRANSFORMS = {"caffe": CaffeTransform, "resnet": ResNetTransform}


class _Files:
    """Paths (relative to ``base``, as one numpy byte array) and labels of one split."""

    def __init__(self, base: Path, samples: list[tuple[str, int]]):
        self.base = str(base)
        self.paths = np.array([os.fsencode(os.path.relpath(p, base)) for p, _ in samples], dtype=np.bytes_)
        self.targets = np.array([t for _, t in samples], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.targets)

    def image(self, i: int) -> Image.Image:
        return load_image(os.path.join(self.base, os.fsdecode(self.paths[i])))


class _TrainSet(Dataset):
    """Keys are (step, index): the sample's augmentation is drawn from (seed, step, index)."""

    def __init__(self, files: _Files, transform, seed: int):
        self.files, self.transform, self.seed = files, transform, seed

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, key: tuple[int, int]) -> tuple[torch.Tensor, int]:
        step, i = key
        u = sample_uniforms(self.seed, step, [i], self.transform.draws)[0].tolist()
        return self.transform.train(self.files.image(i), u), int(self.files.targets[i])


class _EvalSet(Dataset):
    def __init__(self, files: _Files, transform):
        self.files, self.transform = files, transform

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.transform.eval(self.files.image(i)), int(self.files.targets[i])


class _StepBatches:
    """A batch sampler from ``(step, indices)`` pairs: each batch is that step's list of (step, index) keys."""

    def __init__(self, batches: Iterable[tuple[int, torch.Tensor]]):
        self.batches = batches

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        for step, indices in self.batches:
            yield [(int(step), i) for i in torch.as_tensor(indices).reshape(-1).tolist()]


def _loader(dataset: Dataset, num_workers: int, persistent: bool, **kwargs) -> DataLoader:
    return DataLoader(dataset, num_workers=num_workers, persistent_workers=persistent and num_workers > 0,
                      pin_memory=torch.cuda.is_available(),
                      prefetch_factor=PREFETCH_BATCHES if num_workers > 0 else None,
                      generator=torch.Generator().manual_seed(0),  # else the loader draws from the global RNG
                      **kwargs)


class FolderData(Data):
    """An ImageFolder tree under ``<root>/imagenet`` (see the module docstring)."""

    def __init__(self, root: Path, augment: str, crop: int = 224, name: str = "imagenet"):
        from torchvision.datasets.folder import IMG_EXTENSIONS, make_dataset

        if augment not in TRANSFORMS:
            raise ValueError(f"unknown ImageNet augmentation {augment!r}; one of {', '.join(TRANSFORMS)}")
        base = Path(root) / "imagenet"
        train_dir, val_dir = base / "train", base / "val"
        for d in (train_dir, val_dir):
            if not d.is_dir():
                raise DataUnavailable(f"{name}: {d} is not a folder; expected {LAYOUT}")
        classes = sorted(e.name for e in os.scandir(train_dir) if e.is_dir())
        val_classes = sorted(e.name for e in os.scandir(val_dir) if e.is_dir())
        if not classes:
            raise DataUnavailable(f"{name}: no class folders in {train_dir}; expected {LAYOUT}")
        if not val_classes:
            raise DataUnavailable(f"{name}: no class folders in {val_dir} (a flat val set must be sorted into "
                                  f"class folders first); expected {LAYOUT}")
        unknown = sorted(set(val_classes) - set(classes))
        if unknown:
            raise DataUnavailable(f"{name}: {val_dir} has class folders {unknown[:5]} that {train_dir} lacks")
        class_to_idx = {c: i for i, c in enumerate(classes)}
        try:
            train = make_dataset(train_dir, class_to_idx, IMG_EXTENSIONS)
            val = make_dataset(val_dir, {c: class_to_idx[c] for c in val_classes}, IMG_EXTENSIONS,
                               allow_empty=True)
        except FileNotFoundError as exc:
            raise DataUnavailable(f"{name}: {exc}; expected {LAYOUT}") from exc
        if not val:
            raise DataUnavailable(f"{name}: no images in {val_dir}; expected {LAYOUT}")

        self.name, self.classes, self.num_classes = name, classes, len(classes)
        self.augment, self.crop = augment, crop
        self.transform = TRANSFORMS[augment](crop)
        self.input_shape = (3, crop, crop)
        self._train, self._eval = _Files(base, train), _Files(base, val)
        self.provenance = {
            "source": f"image folder tree {base} (torchvision ImageFolder layout)", "path": str(base),
            "train_dir": str(train_dir), "eval_dir": str(val_dir), "eval_split": "val", "synthetic": False,
            "format": "images in class folders, decoded by PIL", "augment": augment, "crop": crop,
            "classes": len(classes), "train_samples": len(self._train), "eval_samples": len(self._eval)}

    @property
    def train_size(self) -> int:
        return len(self._train)

    @property
    def eval_size(self) -> int:
        return len(self._eval)

    def train_batch(self, indices, step: int = 0, seed: int = 0) -> Batch:
        """One batch in this process (what a stream yields for ``step``)."""
        items = [_TrainSet(self._train, self.transform, seed)[(step, i)]
                 for i in torch.as_tensor(indices).reshape(-1).tolist()]
        return torch.stack([x for x, _ in items]), torch.tensor([y for _, y in items], dtype=torch.long)

    def plain_train_batch(self, indices) -> Batch:
        items = [_EvalSet(self._train, self.transform)[i] for i in torch.as_tensor(indices).reshape(-1).tolist()]
        return torch.stack([x for x, _ in items]), torch.tensor([y for _, y in items], dtype=torch.long)

    def train_stream(self, batches: Iterable[tuple[int, torch.Tensor]], seed: int, *,
                     num_workers: int | None = None) -> Iterator[Batch]:
        workers = loader_workers() if num_workers is None else num_workers
        loader = _loader(_TrainSet(self._train, self.transform, seed), workers, persistent=True,
                         batch_sampler=_StepBatches(batches))
        it = iter(loader)
        try:
            for x, y in it:
                yield x, y
        finally:  # persistent workers outlive the pass; stop them with the stream
            shutdown = getattr(it, "_shutdown_workers", None)
            if shutdown is not None:
                shutdown()

    def eval_batches(self, batch_size: int, num_workers: int | None = None) -> Iterator[Batch]:
        workers = loader_workers() if num_workers is None else num_workers
        loader = _loader(_EvalSet(self._eval, self.transform), workers, persistent=False, batch_size=batch_size,
                         shuffle=False)
        for x, y in loader:
            yield x, y

    def eval_image(self, i: int) -> Image.Image:
        """Evaluation image ``i`` as decoded, before any transform."""
        return self._eval.image(i)


def load_imagenet_folder(root: Path, augment: str, crop: int = 224) -> FolderData:
    """ImageNet from ``<root>/imagenet/{train,val}/<wnid>/`` with augmentation ``caffe`` or ``resnet``."""
    return FolderData(root, augment, crop)
