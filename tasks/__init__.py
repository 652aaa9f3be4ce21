"""What is trained: models, data sets and recipes. Never imports ``bench`` or ``methods``."""
from .base import Task
from .data import DataUnavailable
from .alexnet_imagenet import AlexNetImageNet
from .alexnet_mxnet_imagenet import AlexNetMXNetImageNet
from .cifarnet_cifar10 import CifarNetCIFAR10
from .googlenet_imagenet import GoogLeNetImageNet
from .lenet_mnist import LeNetMNIST
from .nin_imagenet import NiNImageNet
from .recipe import Cited, Recipe, assumed
from .resnet20_cifar10 import ResNet20CIFAR10
from .resnet50_imagenet import ResNet50ImageNet
from .vgg11_imagenet import VGG11ImageNet

# the order of docs/contract.md; tasks added since after them.
TASKS: dict[str, Task] = {t.name: t for t in (
    LeNetMNIST(), CifarNetCIFAR10(), AlexNetImageNet(), GoogLeNetImageNet(), ResNet20CIFAR10(),
    ResNet50ImageNet(), NiNImageNet(), VGG11ImageNet(), AlexNetMXNetImageNet())}

__all__ = ["TASKS", "Cited", "DataUnavailable", "Recipe", "Task", "assumed"]
