"""Data sets in their real on-disk formats, and the streaming interface the training loop reads them through
(see :mod:`tasks.data.base`)."""
from .base import Data, DataUnavailable, InMemoryData, loader_workers
from .cifar10 import load_cifar10, provision_cifar10
from .imagenet import FolderData, load_imagenet_folder
from .mnist import load_mnist_format, provision_fashion_mnist
from .synthetic import SyntheticData, make_synthetic

__all__ = ["Data", "DataUnavailable", "FolderData", "InMemoryData", "SyntheticData", "load_cifar10",
           "load_imagenet_folder", "load_mnist_format", "loader_workers", "make_synthetic",
           "provision_cifar10", "provision_fashion_mnist"]
