from .alexnet import AlexNetBN
from .cifarnet import CifarNet
from .googlenet import GoogLeNetBN
from .imagenet_zoo import resnet50, vgg11
from .lenet import LeNet
from .nin import NiN
from .resnet_cifar import resnet20

__all__ = ["AlexNetBN", "CifarNet", "GoogLeNetBN", "LeNet", "NiN", "resnet20", "resnet50", "vgg11"]
