"""What is trained: models, data sets and recipes. Never imports ``bench`` or ``methods``."""
from .base import Task
from .data import DataUnavailable
from .lenet_mnist import LeNetMNIST
from .recipe import Cited, Recipe, assumed

TASKS: dict[str, Task] = {t.name: t for t in (LeNetMNIST(),)}

__all__ = ["TASKS", "Cited", "DataUnavailable", "Recipe", "Task", "assumed"]
