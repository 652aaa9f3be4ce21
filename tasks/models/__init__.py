from .lenet import LeNet

__all__ = ["LeNet"]
