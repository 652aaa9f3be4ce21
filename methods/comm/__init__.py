"""Communicators (sim and dist transports) and the byte ledger they share."""
from .base import Communicator, Handle
from .ledger import ByteLedger, nbytes
from .sim import SimCommunicator

__all__ = ["ByteLedger", "Communicator", "Handle", "SimCommunicator", "nbytes", "make_dist_communicator"]


def make_dist_communicator(**kwargs) -> Communicator:
    """Import torch.distributed lazily: sim-only users never pay for it."""
    from .dist import DistCommunicator

    return DistCommunicator(**kwargs)
