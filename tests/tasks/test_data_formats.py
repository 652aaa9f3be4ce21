"""CIFAR-10 pickles and ImageNet folder trees written here in their real formats, read through tasks.data;
the streaming interface's determinism (seed, step, index), its loader workers, and lazy synthetic sets."""
from __future__ import annotations

import math
import os
import pickle

import numpy as np
import pytest
import torch
from PIL import Image

from commbench.tasks.data import (DataUnavailable, load_cifar10, load_imagenet_folder, load_mnist_format, make_synthetic,
                        provision_fashion_mnist)
from commbench.tasks.data.cifar10 import RESNET28_MEAN, RESNET28_STD, RESNET32_MEAN, RESNET32_STD
from commbench.tasks.data.imagenet import CAFFE_MEAN_RGB
from commbench.tasks.data.rng import sample_uniforms

from ..helpers import fake_mnist

CLASS_NAMES = [b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog", b"frog", b"horse", b"ship", b"truck"]


# --- writers of the real formats -----------------------------------------------------------------------------

def write_cifar10(root, per_batch=6, n_test=5, seed=0):
    """The CIFAR-10 python version: five training batches, a test batch and batches.meta, pickled dicts with
    the official keys; b"data" rows are the R, G, B planes of a 32 x 32 image, row-major. Returns the images
    (N x 3 x 32 x 32 uint8) and labels written, training then test."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    written = {"train_x": [], "train_y": []}

    def batch(path, n, label):
        images = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
        labels = [int(v) for v in rng.integers(0, 10, n)]
        entry = {b"batch_label": label, b"labels": labels, b"data": images.reshape(n, 3072),
                 b"filenames": [f"img_{i}.png".encode() for i in range(n)]}
        path.write_bytes(pickle.dumps(entry))
        return images, labels

    for i in range(1, 6):
        x, y = batch(folder / f"data_batch_{i}", per_batch, f"training batch {i} of 5".encode())
        written["train_x"].append(x)
        written["train_y"] += y
    written["test_x"], written["test_y"] = batch(folder / "test_batch", n_test, b"testing batch 1 of 1")
    (folder / "batches.meta").write_bytes(pickle.dumps(
        {b"num_cases_per_batch": per_batch, b"label_names": CLASS_NAMES, b"num_vis": 3072}))
    written["train_x"] = np.concatenate(written["train_x"])
    return written


WNIDS = ["n01530575", "n01440764", "n02102040"]  # written out of order: class index = sorted position


def write_image_folder(root, train_per_class=3, val_per_class=2, seed=0):
    """<root>/imagenet/{train,val}/<wnid>/*.JPEG, smooth random pictures: the first of each class 256 x 256,
    the others 300 x 260 (W x H). Returns {split: [(path, wnid), ...]}."""
    rng = np.random.default_rng(seed)
    out = {}
    for split, n in (("train", train_per_class), ("val", val_per_class)):
        out[split] = []
        for wnid in WNIDS:
            folder = root / "imagenet" / split / wnid
            folder.mkdir(parents=True)
            for k in range(n):
                w, h = (256, 256) if k == 0 else (300, 260)
                coarse = rng.integers(0, 256, (h // 20 + 1, w // 20 + 1, 3), dtype=np.uint8)
                img = Image.fromarray(coarse).resize((w, h), Image.Resampling.BICUBIC)
                path = folder / f"{wnid}_{k}.JPEG"
                img.save(path, quality=90)
                out[split].append((path, wnid))
    return out


def decoded(path) -> np.ndarray:
    """What a JPEG decoder gives back for the file written (H x W x 3 uint8)."""
    return np.array(Image.open(path).convert("RGB"))


@pytest.fixture(scope="module")
def cifar(tmp_path_factory):
    root = tmp_path_factory.mktemp("cifar")
    return root, write_cifar10(root)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("imagenet")
    return root, write_image_folder(root)


def steps_of(batches):
    return [(step, torch.as_tensor(idx)) for step, idx in batches]


# --- CIFAR-10 -----------------------------------------------------------------------------------------------

def test_cifar10_reads_the_pixels_labels_and_classes_written(cifar):
    root, w = cifar
    data = load_cifar10(root, "resnet32", verify="structure")
    assert data.train_size == 30 and data.eval_size == 5 and data.num_classes == 10
    assert torch.equal(data.train_x, torch.from_numpy(w["train_x"]))
    assert torch.equal(data.eval_x, torch.from_numpy(w["test_x"]))
    assert data.train_y.tolist() == w["train_y"] and data.eval_y.tolist() == [int(v) for v in w["test_y"]]
    assert data.provenance["classes"] == [n.decode() for n in CLASS_NAMES]
    assert data.provenance["verified"] == "structure" and data.provenance["synthetic"] is False
    assert data.provenance["eval_split"] == "test_batch"
    # resnet32 evaluation is un-augmented: ToTensor (x / 255) then Normalize
    (x, y), = list(data.eval_batches(100))
    mean = torch.tensor(RESNET32_MEAN)[None, :, None, None]
    std = torch.tensor(RESNET32_STD)[None, :, None, None]
    expected = (torch.from_numpy(w["test_x"]).float() / 255 - mean) / std
    assert torch.allclose(x, expected, atol=1e-6) and y.tolist() == [int(v) for v in w["test_y"]]


def test_cifar10_eval_crops(cifar):
    root, w = cifar
    test_x = torch.from_numpy(w["test_x"]).double()
    # resnet28: central 28 x 28, (x - mean) / std on the 0-255 scale (SSD-SGD's MXNet constants)
    x = next(load_cifar10(root, "resnet28", verify="structure").eval_batches(100))[0]
    mean = torch.tensor(RESNET28_MEAN, dtype=torch.float64)[None, :, None, None]
    std = torch.tensor(RESNET28_STD, dtype=torch.float64)[None, :, None, None]
    assert torch.allclose(x.double(), (test_x[:, :, 2:30, 2:30] - mean) / std, atol=1e-5)
    # cifarnet: central 24 x 24, per-image standardisation
    x = next(load_cifar10(root, "cifarnet", verify="structure").eval_batches(100))[0]
    crop = test_x[:, :, 4:28, 4:28]
    m, s = crop.mean(dim=(1, 2, 3), keepdim=True), crop.std(dim=(1, 2, 3), keepdim=True, correction=0)
    assert torch.allclose(x.double(), (crop - m) / s.clamp(min=1 / math.sqrt(3 * 24 * 24)), atol=1e-5)


@pytest.mark.parametrize("augment, size", [("cifarnet", 24), ("resnet32", 32), ("resnet28", 28)])
def test_cifar10_augmentation_shapes(cifar, augment, size):
    data = load_cifar10(cifar[0], augment, verify="structure")
    assert data.input_shape == (3, size, size)
    x, y = data.train_batch(torch.tensor([0, 7, 29]), step=3, seed=11)
    assert x.shape == (3, 3, size, size) and x.dtype == torch.float32 and y.shape == (3,)
    assert next(data.eval_batches(4))[0].shape == (4, 3, size, size)


def reference_cifarnet(image: np.ndarray, u: np.ndarray) -> np.ndarray:
    """One image through the TF tutorial's distortions, written out step by step (float64)."""
    top, left = int(u[0] * 9), int(u[1] * 9)
    x = image[:, top:top + 24, left:left + 24].astype(np.float64)
    if u[2] < 0.5:
        x = x[:, :, ::-1]
    x = x + (u[3] * 2 - 1) * 63
    m = x.mean(axis=(1, 2), keepdims=True)
    x = (x - m) * (0.2 + u[4] * 1.6) + m
    return (x - x.mean()) / max(x.std(), 1 / math.sqrt(x.size))


def test_cifarnet_augmentation_matches_a_per_image_reference(cifar):
    root, w = cifar
    data = load_cifar10(root, "cifarnet", verify="structure")
    idx = torch.tensor([4, 17, 0, 29, 8, 12])
    x, _ = data.train_batch(idx, step=5, seed=3)
    u = sample_uniforms(3, 5, idx, 5).numpy()
    for row, i in enumerate(idx.tolist()):
        assert np.allclose(x[row].double().numpy(), reference_cifarnet(w["train_x"][i], u[row]), atol=1e-4)


@pytest.mark.parametrize("augment, crop, span", [("resnet32", 32, 9), ("resnet28", 28, 13)])
def test_pad_crop_flip_is_a_window_of_the_padded_image(cifar, augment, crop, span):
    root, w = cifar
    data = load_cifar10(root, augment, verify="structure")
    idx = torch.arange(30)
    x, _ = data.train_batch(idx, step=2, seed=9)
    aug = data.augment
    pixels = x * aug.std + aug.mean
    pixels = (pixels * 255 if augment == "resnet32" else pixels).round()
    u = sample_uniforms(9, 2, idx, 3).numpy()
    padded = np.pad(w["train_x"], ((0, 0), (0, 0), (4, 4), (4, 4)))
    flips = 0
    for i in range(30):
        top, left = int(u[i, 0] * span), int(u[i, 1] * span)
        window = padded[i, :, top:top + crop, left:left + crop]
        if u[i, 2] < 0.5:
            window, flips = window[:, :, ::-1], flips + 1
        assert np.array_equal(pixels[i].numpy().astype(np.int64), window.astype(np.int64))
    assert 0 < flips < 30


def test_augmentation_depends_on_seed_step_and_index_only(cifar):
    data = load_cifar10(cifar[0], "cifarnet", verify="structure")
    idx = torch.tensor([3, 1, 4, 15, 9, 2, 6])
    a, _ = data.train_batch(idx, step=7, seed=5)
    assert torch.equal(a, data.train_batch(idx, step=7, seed=5)[0])                # deterministic
    assert not torch.allclose(a, data.train_batch(idx, step=8, seed=5)[0])         # a new draw each step
    assert not torch.allclose(a, data.train_batch(idx, step=7, seed=6)[0])         # and each seed
    # a sample's input does not depend on the rest of its batch (up to float reduction order)
    alone = torch.cat([data.train_batch(idx[i:i + 1], step=7, seed=5)[0] for i in range(len(idx))])
    assert torch.allclose(a, alone, atol=1e-6)
    shuffled, _ = data.train_batch(idx.flip(0), step=7, seed=5)
    assert torch.allclose(a, shuffled.flip(0), atol=1e-6)


def check_streams(data, num_workers=None, steps=4, per_worker=3, seed=21):
    """One stream per worker over slices of each step's global batch, consumed alternately (as the sim loop
    does) and alone (as a dist process does), and restarted mid-way (a resumed run): identical tensors."""
    g = torch.Generator().manual_seed(0)
    global_batches = [(s, torch.randperm(data.train_size, generator=g)[:2 * per_worker]) for s in range(steps)]

    def mine(rank, start=0):
        return ((s, idx[rank * per_worker:(rank + 1) * per_worker]) for s, idx in global_batches[start:])

    kw = {} if num_workers is None else {"num_workers": num_workers}
    alone = list(data.train_stream(mine(0), seed, **kw))
    s0, s1 = data.train_stream(mine(0), seed, **kw), data.train_stream(mine(1), seed, **kw)
    interleaved = []
    for _ in range(steps):
        interleaved.append(next(s0))
        next(s1)
    resumed = list(data.train_stream(mine(0, start=2), seed, **kw))
    assert len(alone) == steps
    for (xa, ya), (xb, yb) in zip(alone, interleaved):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
    for (xa, ya), (xr, yr) in zip(alone[2:], resumed):
        assert torch.equal(xa, xr) and torch.equal(ya, yr)
    direct = data.train_batch(global_batches[1][1][:per_worker], step=1, seed=seed)
    assert torch.equal(alone[1][0], direct[0]) and torch.equal(alone[1][1], direct[1])
    return alone


@pytest.mark.parametrize("augment", ["cifarnet", "resnet32", "resnet28"])
def test_cifar10_streams_agree_interleaved_alone_and_resumed(cifar, augment):
    check_streams(load_cifar10(cifar[0], augment, verify="structure"))


def test_cifar10_missing_or_malformed_files(tmp_path, cifar):
    with pytest.raises(DataUnavailable, match=r"cifar-10-batches-py.*cifar-10-python\.tar\.gz"):
        load_cifar10(tmp_path / "none", "cifarnet", download=False)
    with pytest.raises(DataUnavailable, match="data_batch_1"):
        load_cifar10(tmp_path / "none", "cifarnet", verify="structure")
    # genuinely formatted but not the official files: torchvision's md5 check refuses them and says why
    with pytest.raises(DataUnavailable, match="md5.*structure"):
        load_cifar10(cifar[0], "cifarnet", download=False)
    bad = tmp_path / "bad"
    write_cifar10(bad)
    path = bad / "cifar-10-batches-py" / "data_batch_3"
    entry = pickle.loads(path.read_bytes())
    del entry[b"labels"]
    path.write_bytes(pickle.dumps(entry))
    with pytest.raises(DataUnavailable, match="labels"):
        load_cifar10(bad, "cifarnet", verify="structure")
    with pytest.raises(ValueError, match="augmentation"):
        load_cifar10(cifar[0], "inception", verify="structure")


def test_cifar10_reads_numpy1_python2_style_pickles(tmp_path):
    """The official files were pickled by Python 2 with numpy 1.x (``numpy.core`` names): protocol 2."""
    w = write_cifar10(tmp_path)
    folder = tmp_path / "cifar-10-batches-py"
    for path in folder.iterdir():
        entry = pickle.loads(path.read_bytes())
        blob = pickle.dumps(entry, protocol=2).replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
        path.write_bytes(blob)
    data = load_cifar10(tmp_path, "resnet28", verify="structure")
    assert torch.equal(data.eval_x, torch.from_numpy(w["test_x"]))


def test_cifar10_unpickler_refuses_foreign_globals(tmp_path):
    write_cifar10(tmp_path)
    path = tmp_path / "cifar-10-batches-py" / "test_batch"
    entry = pickle.loads(path.read_bytes())
    entry[b"filenames"] = [print] * len(entry[b"labels"])  # a callable global: never resolved
    path.write_bytes(pickle.dumps(entry))
    with pytest.raises(DataUnavailable, match="unexpected global"):
        load_cifar10(tmp_path, "cifarnet", verify="structure")


# --- ImageNet folder tree ------------------------------------------------------------------------------------

def test_image_folder_classes_labels_and_provenance(folder):
    root, written = folder
    data = load_imagenet_folder(root, "caffe")
    assert data.classes == sorted(WNIDS) and data.num_classes == 3
    assert data.train_size == 9 and data.eval_size == 6 and data.input_shape == (3, 224, 224)
    order = sorted(WNIDS)
    _, y = data.train_batch(torch.arange(9), step=0, seed=0)
    expected = sorted((str(p), order.index(c)) for p, c in written["train"])
    assert y.tolist() == [label for _, label in expected]
    ys = torch.cat([y for _, y in data.eval_batches(4)])
    assert ys.tolist() == [label for _, label in sorted((str(p), order.index(c)) for p, c in written["val"])]
    assert data.provenance["eval_split"] == "val" and data.provenance["synthetic"] is False
    assert data.provenance["path"] == str(root / "imagenet")


def test_caffe_eval_is_the_decoded_pixels_minus_the_mean(folder):
    root, written = folder
    data = load_imagenet_folder(root, "caffe", crop=224)
    x, _ = next(data.eval_batches(6))
    val = sorted(written["val"], key=lambda pc: str(pc[0]))
    mean = torch.tensor(CAFFE_MEAN_RGB)[:, None, None]
    for row, (path, _) in enumerate(val):
        pixels = decoded(path)
        if pixels.shape[:2] == (256, 256):  # already 256 x 256: no resampling, the exact decoded pixels
            crop = torch.from_numpy(pixels[16:240, 16:240]).permute(2, 0, 1).float()
        else:
            resized = np.array(Image.fromarray(pixels).resize((256, 256), Image.Resampling.BILINEAR))
            crop = torch.from_numpy(resized[16:240, 16:240]).permute(2, 0, 1).float()
        assert torch.equal(x[row], crop - mean)
        assert np.array_equal(np.array(data.eval_image(row)), pixels)


def test_resnet_eval_resizes_the_short_side_and_crops_the_centre(folder):
    root, written = folder
    data = load_imagenet_folder(root, "resnet", crop=224)
    x, _ = next(data.eval_batches(6))
    val = sorted(written["val"], key=lambda pc: str(pc[0]))
    pixels = decoded(val[1][0])  # 300 x 260: short side 260 -> 256, long side int(256 * 300 / 260) = 295
    resized = np.array(Image.fromarray(pixels).resize((295, 256), Image.Resampling.BILINEAR))
    top, left = 16, int(round((295 - 224) / 2))
    crop = torch.from_numpy(resized[top:top + 224, left:left + 224]).permute(2, 0, 1).float() / 255
    mean, std = torch.tensor([0.485, 0.456, 0.406])[:, None, None], torch.tensor([0.229, 0.224, 0.225])[:, None, None]
    assert torch.allclose(x[1], (crop - mean) / std, atol=1e-6)


@pytest.mark.parametrize("augment, crop", [("caffe", 224), ("caffe", 227), ("resnet", 224), ("resnet", 96)])
def test_image_folder_augmentation_shapes_and_determinism(folder, augment, crop):
    data = load_imagenet_folder(folder[0], augment, crop=crop)
    idx = torch.tensor([0, 4, 8, 2])
    x, y = data.train_batch(idx, step=3, seed=1)
    assert x.shape == (4, 3, crop, crop) and data.input_shape == (3, crop, crop)
    assert torch.equal(x, data.train_batch(idx, step=3, seed=1)[0])
    assert not torch.equal(x, data.train_batch(idx, step=4, seed=1)[0])
    assert torch.equal(x[1:2], data.train_batch(idx[1:2], step=3, seed=1)[0])  # per sample, exactly
    assert next(data.eval_batches(5))[0].shape == (5, 3, crop, crop)


def test_random_resized_crop_follows_torchvision(folder):
    """The box drawn from our uniforms obeys RandomResizedCrop's rules (scale 0.08-1, ratio 3/4-4/3)."""
    data = load_imagenet_folder(folder[0], "resnet", crop=224)
    t = data.transform
    for step in range(200):
        u = sample_uniforms(0, step, [0], t.draws)[0].tolist()
        top, left, h, w = t.box(300, 260, u)
        assert 0 <= top <= 260 - h and 0 <= left <= 300 - w
        assert 0.08 * 300 * 260 * 0.9 <= h * w <= 300 * 260
        assert 3 / 4 * 0.9 <= w / h <= 4 / 3 * 1.1


def test_loader_workers_give_the_same_batches(folder):
    data = load_imagenet_folder(folder[0], "resnet", crop=64)
    by_workers = {n: check_streams(data, num_workers=n) for n in (0, 2)}
    for (x0, y0), (x2, y2) in zip(by_workers[0], by_workers[2]):
        assert torch.equal(x0, x2) and torch.equal(y0, y2)


def test_loader_workers_env_var(folder, monkeypatch):
    from commbench.tasks.data import loader_workers

    monkeypatch.setenv("COMMBENCH_LOADER_WORKERS", "0")
    assert loader_workers() == 0
    data = load_imagenet_folder(folder[0], "caffe", crop=32)
    assert [x.shape[0] for x, _ in data.train_stream(iter([(0, torch.tensor([1, 2]))]), 0)] == [2]
    monkeypatch.delenv("COMMBENCH_LOADER_WORKERS")
    assert loader_workers() == min(4, len(os.sched_getaffinity(0)))  # the default: the cores, at most 4


def test_missing_or_flat_image_folder_says_what_layout_is_expected(tmp_path):
    with pytest.raises(DataUnavailable, match=r"imagenet/train is not a folder.*<wnid>/\*\.JPEG"):
        load_imagenet_folder(tmp_path, "caffe")
    train = tmp_path / "imagenet" / "train" / "n01440764"
    train.mkdir(parents=True)
    Image.new("RGB", (40, 30)).save(train / "a.JPEG")
    (tmp_path / "imagenet" / "val").mkdir()
    Image.new("RGB", (40, 30)).save(tmp_path / "imagenet" / "val" / "ILSVRC2012_val_00000001.JPEG")
    with pytest.raises(DataUnavailable, match="sorted into class folders"):
        load_imagenet_folder(tmp_path, "caffe")
    (tmp_path / "imagenet" / "val" / "n99999999").mkdir()
    with pytest.raises(DataUnavailable, match="n99999999"):
        load_imagenet_folder(tmp_path, "caffe")


# --- synthetic and MNIST -------------------------------------------------------------------------------------

def test_lazy_synthetic_imagenet_shape_costs_nothing_up_front():
    data = make_synthetic((3, 224, 224), 1000, 10_000, 100)
    assert data.train_size == 10_000 and data.eval_size == 100 and data.num_classes == 1000
    assert data.input_shape == (3, 224, 224) and not data._full and not data._prototypes
    idx = torch.tensor([9_999, 0, 4_321])
    x, y = data.train_batch(idx)
    assert x.shape == (3, 3, 224, 224) and y.min() >= 0 and y.max() < 1000
    again = make_synthetic((3, 224, 224), 1000, 10_000, 100)
    assert torch.equal(x, again.train_batch(idx)[0]) and torch.equal(y, again.train_batch(idx)[1])
    assert torch.equal(x[1:2], again.train_batch(idx[1:2])[0])  # any sample alone, in any order
    assert data.provenance["synthetic"] is True and "generated" in data.provenance["source"]
    sizes = [len(y) for _, y in data.eval_batches(32)]
    assert sizes == [32, 32, 32, 4]


def test_synthetic_is_learnable_by_its_prototypes():
    data = make_synthetic((1, 28, 28), 10, 500, 200)
    protos = torch.stack([data.prototype(c) for c in range(10)]).flatten(1)
    x, y = next(data.eval_batches(200))
    nearest = (x.flatten(1) @ protos.T - 0.5 * (protos ** 2).sum(1)).argmax(1)
    accuracy = (nearest == y).float().mean().item()
    assert 0.6 < accuracy < 1.0  # classes overlap, but the signal is there
    assert torch.equal(data.train_x[[5, 7]], data.train_batch([5, 7])[0])
    check_streams(data)


def test_mnist_stream_is_the_plain_scaled_pixels(tmp_path):
    images, labels = fake_mnist(tmp_path)
    provision_fashion_mnist(tmp_path)
    data = load_mnist_format("fashion-mnist", tmp_path)
    assert data.input_shape == (1, 28, 28) and data.provenance["synthetic"] is False
    stream = data.train_stream(iter([(0, torch.tensor([3, 0])), (1, torch.tensor([5]))]), seed=123)
    (x0, y0), (x1, y1) = list(stream)
    assert torch.equal(x0, (data.train_x[[3, 0]].float().unsqueeze(1) / 255.0 - 0.5) * 2.0)
    assert y0.tolist() == [labels["train"][3], labels["train"][0]] and x1.shape == (1, 1, 28, 28)
    check_streams(data)
