"""Data in its real on-disk formats: IDX files written here, read by torchvision, provisioned like Debian's."""
from __future__ import annotations


import pytest
import torch

from commbench.tasks.data import DataUnavailable, load_mnist_format, make_synthetic, provision_fashion_mnist
from ..helpers import fake_mnist






def test_fashion_mnist_provisioned_from_gz_files(tmp_path):
    images, labels = fake_mnist(tmp_path)
    origin = provision_fashion_mnist(tmp_path)
    assert origin == str(tmp_path)
    data = load_mnist_format("fashion-mnist", tmp_path)
    assert data.train_size == 30 and data.eval_size == 10
    x, y = data.train_batch(torch.tensor([3, 0]))
    assert x.shape == (2, 1, 28, 28) and x.min() >= -1 and x.max() <= 1
    expected = (torch.tensor(images["train"][3], dtype=torch.float32) / 255 - 0.5) * 2
    assert torch.allclose(x[0, 0], expected)
    assert y.tolist() == [labels["train"][3], labels["train"][0]]
    # provisioning is remembered: a second look reports the original source
    assert provision_fashion_mnist(tmp_path) == origin


def test_mnist_reads_torchvision_layout_without_download(tmp_path):
    fake_mnist(tmp_path / "MNIST" / "raw", compress=False)
    data = load_mnist_format("mnist", tmp_path, scaling="caffe", verify="structure")  # generated: no MD5s
    x, _ = data.train_batch(torch.tensor([0]))
    assert x.min() >= 0 and x.max() < 1  # Caffe's 1/256 scaling


def test_missing_fashion_mnist_says_how_to_get_it(tmp_path, monkeypatch):
    import commbench.tasks.data.mnist as mnist

    monkeypatch.setattr(mnist, "DEBIAN_FASHION_MNIST", tmp_path / "nowhere")
    with pytest.raises(DataUnavailable, match="dataset-fashion-mnist"):
        provision_fashion_mnist(tmp_path / "root")


def test_synthetic_is_deterministic_and_labelled():
    a, b = make_synthetic((1, 4, 4), 3, 20, 5), make_synthetic((1, 4, 4), 3, 20, 5)
    assert torch.equal(a.train_x, b.train_x) and torch.equal(a.eval_y, b.eval_y)
    assert a.provenance["synthetic"] is True and a.num_classes == 3


def test_a_failed_download_says_why_in_one_line():
    from commbench.tasks.data.base import download_failure

    try:
        try:
            raise ConnectionRefusedError("[Errno 111] Connection refused")
        except OSError as inner:
            raise RuntimeError("Error downloading train-images-idx3-ubyte.gz:\n") from inner
    except RuntimeError as exc:
        assert download_failure(exc) == "[Errno 111] Connection refused"
    assert download_failure(RuntimeError("")) == "RuntimeError"
