from .base import DataUnavailable, InMemoryData
from .mnist import load_mnist_format, provision_fashion_mnist
from .synthetic import make_synthetic

__all__ = ["DataUnavailable", "InMemoryData", "load_mnist_format", "make_synthetic", "provision_fashion_mnist"]
