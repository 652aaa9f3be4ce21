"""Data sets in their real on-disk formats, and the streaming interface the training loop reads them through
(see :mod:`commbench.tasks.data.base`)."""
from .base import Data, DataUnavailable, InMemoryData, loader_workers
from .cifar10 import load_cifar10, provision_cifar10
from .cifar10_jpeg import load_cifar10_jpeg, provision_cifar10_jpeg
from .imagenet import FolderData, load_imagenet_folder
from .mnist import load_mnist_format, provision_fashion_mnist, provision_mnist
from .synthetic import SyntheticData, make_synthetic



def provisioners() -> dict:
    """Each real data set's provisioning function: ``f(root)`` makes it ready under ``root`` and returns where
    it came from (a dict of provenance, or a line), or raises :class:`DataUnavailable` saying what to do."""
    return {"mnist": provision_mnist, "fashion-mnist": provision_fashion_mnist, "cifar10": provision_cifar10,
            "cifar10-jpeg": provision_cifar10_jpeg}


__all__ = ["Data", "DataUnavailable", "FolderData", "InMemoryData", "SyntheticData", "load_cifar10",
           "load_cifar10_jpeg", "load_imagenet_folder", "load_mnist_format", "loader_workers", "make_synthetic",
           "provision_cifar10", "provision_cifar10_jpeg", "provision_fashion_mnist", "provision_mnist", "provisioners"]
