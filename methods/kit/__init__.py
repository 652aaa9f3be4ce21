"""The compressor kit: a method in three parts, GRACE's in commbench's terms.

* a :class:`Compressor` turns one worker's group of tensors (a bucket, or the whole gradient) into a payload,
  and the workers' payloads back into their average; it declares whether its payloads add up in payload space
  (``linear``: an all-reduce carries them) or must be gathered (same size, or each its own size), and what its
  output is unbiased for;
* a :class:`Memory` carries what a worker did not send into its next step (error feedback), or nothing;
* :class:`KitMethod` composes them into a method: the exchange after backward or per bucket while backward
  runs, weight decay, the optimizer's step, the memory in checkpoints, and :func:`kit_hook` gives the same
  exchange to torch's DistributedDataParallel, counted in the same ledger.

docs/extending.md shows a top-k with error feedback in one short file.
"""
from .compressor import Compressor, Group
from .exchange import Exchange
from .hook import KitHookState, kit_hook
from .memory import Memory, NoMemory, Residual
from .method import KitMethod

__all__ = ["Compressor", "Exchange", "Group", "KitHookState", "KitMethod", "Memory", "NoMemory", "Residual",
           "kit_hook"]
