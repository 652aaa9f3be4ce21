"""The link a run was declared for (``node_link``), checked on every node before the first exchange: a speed
measured on some other network is not the one the record would claim."""
from __future__ import annotations

import socket

import torch

from commbench.config import ConfigError, net_rate_bits
from commbench.methods.comm import Communicator
from commbench.store import provenance  # read at call time: tests stand in for the node's links


def check_node_link(rate: str) -> None:
    """A run that asks for links limited to ``rate`` (``node_link``) fails here, on any node whose links are not:
    its throughput would be a measurement of some other network."""
    limits = provenance.link_limits()
    wrong = {dev: bits for dev, bits in limits.items() if abs(bits - net_rate_bits(rate)) > 1e-6 * bits}
    if not limits or wrong:
        found = ", ".join(f"{dev} at {bits / 1e6:g} Mbit/s" for dev, bits in sorted(limits.items())) or "none limited"
        raise ConfigError(f"node_link: the run asks for links of {rate}, but {socket.gethostname()}'s are {found} "
                          f"(the two-node cluster sets them: bash slurm/local/up2.sh --rate {rate})")


def agree_on_node_link(rate: str, comm: Communicator) -> None:
    """:func:`check_node_link` in every process, and fail in all of them if it fails in one: a process whose
    node is right must not wait in its first exchange for a peer that has left."""
    try:
        check_node_link(rate)
        mine = None
    except ConfigError as exc:
        mine = exc
    failed = comm.control_sum(torch.tensor([0.0 if mine is None else 1.0], dtype=torch.float64)).item()
    if mine is not None:
        raise mine
    if failed:
        raise ConfigError(f"node_link: {failed:.0f} other process(es) found their node's links other than {rate} "
                          f"(their errors name them)")
