"""Real MNIST and cifar10-jpeg: provisioning from a local mirror (checksums, counts per class, provenance), and
every way that can go wrong, on generated files.

The tests marked ``mirror`` read the real files from ``$COMMBENCH_DATA_MIRROR``: without it they skip, saying
why, except under ``COMMBENCH_REQUIRE_DATA=1`` (set by ``.ci/run`` where the mirror exists), where they fail.
"""
from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import commbench.tasks.data.cifar10_jpeg as jpeg
import commbench.tasks.data.mnist as mnist
from commbench.tasks.data import DataUnavailable, load_cifar10_jpeg, load_mnist_format, provision_mnist
from commbench.tasks.data.mirror import MIRROR_ENV, md5_of

from ..conftest import commbench
from ..helpers import fake_mnist

MNIST_TEST_PER_CLASS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]  # the mirror's README
MNIST_TRAIN_PER_CLASS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]


def real_mirror(name: str) -> Path:
    root = os.environ.get(MIRROR_ENV, "").strip()
    folder = Path(root) / name if root else None
    if folder is None or not folder.is_dir():
        reason = f"{MIRROR_ENV} is not set" if not root else f"{MIRROR_ENV}={root} has no {name}/"
        if os.environ.get("COMMBENCH_REQUIRE_DATA") == "1":
            pytest.fail(f"COMMBENCH_REQUIRE_DATA=1 but {reason}", pytrace=False)
        pytest.skip(f"the real {name} needs the local mirror: {reason}")
    return folder


# -- the real files ------------------------------------------------------------------------------------------
def test_real_mnist_from_the_mirror_has_the_canonical_checksums_and_counts(tmp_path):
    real_mirror("mnist")
    found = provision_mnist(tmp_path)
    assert found["verified"] == "md5" and found["md5"] == mnist.MNIST_MD5
    assert "local mirror" in found["source"]
    data = load_mnist_format("mnist", tmp_path)
    assert torch.bincount(data.eval_y).tolist() == MNIST_TEST_PER_CLASS
    assert torch.bincount(data.train_y).tolist() == MNIST_TRAIN_PER_CLASS
    assert data.provenance["md5"] == mnist.MNIST_MD5 and not data.provenance.get("substitute_for")


@pytest.fixture(scope="module")
def decoded_jpeg(tmp_path_factory):
    real_mirror("cifar10-jpeg")
    root = tmp_path_factory.mktemp("jpeg")
    return root, jpeg.provision_cifar10_jpeg(root)


def test_real_cifar10_jpeg_counts_checksum_and_stand_in_label(decoded_jpeg):
    root, found = decoded_jpeg
    assert found["archive_md5"] == jpeg.ARCHIVE_MD5 and found["substitute_for"] == "cifar10"
    data = load_cifar10_jpeg(root, "cifarnet")
    assert torch.bincount(data.train_y).tolist() == [5000] * 10
    assert torch.bincount(data.eval_y).tolist() == [1000] * 10
    assert data.train_x.shape == (50_000, 3, 32, 32) and data.train_x.dtype == torch.uint8
    assert data.provenance["classes"] == list(jpeg.CLASSES) and data.name == "cifar10-jpeg"
    # pixel statistics close to the canonical CIFAR-10's (0-255 scale), and not equal to them
    assert np.allclose(found["channel_mean"], [125.307, 122.950, 113.865], atol=0.1)
    assert all(0.99 < s / c < 1.0 for s, c in zip(found["channel_std"], [62.993, 62.089, 66.705]))
    x, y = data.train_batch(torch.tensor([0, 49_999]), step=1, seed=1)
    assert x.shape == (2, 3, 24, 24) and y.tolist() == [0, 9]


def test_real_cifar10_jpeg_is_decoded_once(decoded_jpeg):
    root, found = decoded_jpeg
    cache = root / jpeg.NAME / "decoded"
    before = {p.name: p.stat().st_mtime_ns for p in cache.iterdir()}
    assert jpeg.provision_cifar10_jpeg(root) == found
    assert {p.name: p.stat().st_mtime_ns for p in cache.iterdir()} == before
    assert {f: md5_of(cache / f) for f in found["decoded_md5"]} == found["decoded_md5"]


# -- MNIST on generated files ----------------------------------------------------------------------------------
@pytest.fixture
def fake_mirror(tmp_path, monkeypatch):
    """A mirror holding generated MNIST-format files (not the canonical ones)."""
    mirror = tmp_path / "mirror"
    fake_mnist(mirror / "mnist")
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    return mirror


def test_a_mirror_file_with_another_md5_is_named_and_nothing_is_left(tmp_path, fake_mirror):
    root = tmp_path / "root"
    with pytest.raises(DataUnavailable, match=r"train-images-idx3-ubyte has MD5 [0-9a-f]{32}, not MNIST's 6bbc9a"):
        provision_mnist(root, download=False)
    assert not any((root / "MNIST" / "raw").glob("*-ubyte")), "files that failed the check were left behind"


def test_mirrored_files_with_the_canonical_md5s_are_provisioned_with_their_provenance(tmp_path, fake_mirror,
                                                                                       monkeypatch):
    sums = {name: md5_of_gz(fake_mirror / "mnist" / f"{name}.gz") for name in mnist.IDX_FILES}
    monkeypatch.setattr(mnist, "MNIST_MD5", sums)  # these generated files play the canonical ones
    found = provision_mnist(tmp_path / "root", download=False)
    assert found["md5"] == sums and found["verified"] == "md5" and str(fake_mirror) in found["source"]
    data = load_mnist_format("mnist", tmp_path / "root")
    assert data.train_size == 30 and data.provenance["md5"] == sums
    # remembered: a later look trusts the stamp and says where the files first came from
    assert provision_mnist(tmp_path / "root", download=False) == found


def test_a_changed_file_is_checked_again(tmp_path, fake_mirror, monkeypatch):
    sums = {name: md5_of_gz(fake_mirror / "mnist" / f"{name}.gz") for name in mnist.IDX_FILES}
    monkeypatch.setattr(mnist, "MNIST_MD5", sums)
    provision_mnist(tmp_path / "root", download=False)
    victim = tmp_path / "root" / "MNIST" / "raw" / "t10k-labels-idx1-ubyte"
    victim.write_bytes(victim.read_bytes()[:-1] + b"\x07")
    with pytest.raises(DataUnavailable, match="t10k-labels-idx1-ubyte has MD5"):
        provision_mnist(tmp_path / "root", download=False)


def test_without_mirror_and_download_the_message_names_the_stand_in(tmp_path, monkeypatch):
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    with pytest.raises(DataUnavailable, match=f"no mirror \\({MIRROR_ENV} is not set\\).*fashion-mnist"):
        provision_mnist(tmp_path, download=False)
    monkeypatch.setenv(MIRROR_ENV, str(tmp_path / "empty"))
    with pytest.raises(DataUnavailable, match="has no mnist/ folder"):
        provision_mnist(tmp_path, download=False)


def md5_of_gz(path: Path) -> str:
    import hashlib

    return hashlib.md5(gzip.decompress(path.read_bytes())).hexdigest()


# -- cifar10-jpeg on generated files ---------------------------------------------------------------------------
def write_jpeg_tree(folder: Path, per_class: dict[str, int], classes=jpeg.CLASSES) -> dict:
    """{train,test}/<class>/<NNNN>.jpg, random 32 x 32 pictures; returns the JPEG bytes per (split, class)."""
    rng = np.random.default_rng(0)
    written = {}
    for split, count in per_class.items():
        for label in classes:
            (folder / split / label).mkdir(parents=True)
            for i in range(count):
                buf = io.BytesIO()
                Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(buf, "JPEG", quality=90)
                (folder / split / label / f"{i:04d}.jpg").write_bytes(buf.getvalue())
                written.setdefault((split, label), []).append(buf.getvalue())
    return written


@pytest.fixture
def small_sets(monkeypatch):
    monkeypatch.setattr(jpeg, "PER_CLASS", {"train": 3, "test": 2})
    return {"train": 3, "test": 2}


def test_a_jpeg_tree_is_decoded_in_class_then_file_order(tmp_path, small_sets):
    written = write_jpeg_tree(tmp_path / "cifar10-jpeg", small_sets)
    data = load_cifar10_jpeg(tmp_path, "resnet32")
    assert data.train_y.tolist() == [c for c in range(10) for _ in range(3)]
    expected = np.asarray(Image.open(io.BytesIO(written[("train", "bird")][1])).convert("RGB")).transpose(2, 0, 1)
    assert np.array_equal(data.train_x[2 * 3 + 1].numpy(), expected)  # bird is class 2, its second file
    assert data.provenance["substitute_for"] == "cifar10" and "JPEG tree" in data.provenance["source"]


def test_an_archive_in_the_mirror_is_read_in_place_after_its_md5(tmp_path, small_sets, monkeypatch):
    tree = tmp_path / "build" / "cifar10-jpeg"
    write_jpeg_tree(tree, small_sets)
    mirror = tmp_path / "mirror" / "cifar10-jpeg"
    mirror.mkdir(parents=True)
    with tarfile.open(mirror / jpeg.ARCHIVE, "w:gz") as tar:
        tar.add(tree, arcname="cifar10-jpeg")
    monkeypatch.setenv(MIRROR_ENV, str(tmp_path / "mirror"))
    with pytest.raises(DataUnavailable, match=f"{jpeg.ARCHIVE} has MD5 [0-9a-f]{{32}}, not the archive's"):
        jpeg.provision_cifar10_jpeg(tmp_path / "root")
    monkeypatch.setattr(jpeg, "ARCHIVE_MD5", md5_of(mirror / jpeg.ARCHIVE))
    found = jpeg.provision_cifar10_jpeg(tmp_path / "root")
    assert found["source"].startswith("local mirror") and not (tmp_path / "root" / "cifar10-jpeg" / "train").exists()
    from_tree = load_cifar10_jpeg(tmp_path / "build", "cifarnet")
    from_archive = load_cifar10_jpeg(tmp_path / "root", "cifarnet")
    assert torch.equal(from_tree.train_x, from_archive.train_x) and torch.equal(from_tree.eval_y, from_archive.eval_y)


def test_a_tree_with_a_missing_class_or_image_is_refused(tmp_path, small_sets):
    write_jpeg_tree(tmp_path / "a" / "cifar10-jpeg", small_sets, classes=jpeg.CLASSES[:9])
    with pytest.raises(DataUnavailable, match="class folders .* not CIFAR-10's"):
        jpeg.provision_cifar10_jpeg(tmp_path / "a")
    write_jpeg_tree(tmp_path / "b" / "cifar10-jpeg", small_sets)
    (tmp_path / "b" / "cifar10-jpeg" / "test" / "frog" / "0001.jpg").unlink()
    with pytest.raises(DataUnavailable, match="test/ must hold 2 images per class; found frog 1"):
        jpeg.provision_cifar10_jpeg(tmp_path / "b")
    assert not (tmp_path / "b" / "cifar10-jpeg" / "decoded").exists()


def test_the_data_command_names_what_it_cannot_provision(tmp_path, monkeypatch):
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    bad = commbench("data", "mnst", "--data-root", str(tmp_path))
    assert bad.returncode == 2 and "data set 'mnst'" in bad.stderr
    write_jpeg_tree(tmp_path / "cifar10-jpeg", {"train": 1, "test": 1})  # far too few images
    refused = commbench("data", "cifar10-jpeg", "--data-root", str(tmp_path))
    assert refused.returncode == 1 and "cifar10-jpeg   unavailable" in refused.stdout, refused.stdout
    assert "must hold 5000 images per class" in refused.stdout
