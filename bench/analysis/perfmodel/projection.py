"""Time to accuracy projected to a cluster the user names: steps to the target (measured: for a given method,
batch and number of workers they do not depend on the hardware) x the step time the cluster would take.

The step time is the compute of one worker's step, the method's codec time, and the exchange on the cluster's
links by the method's topology, less what computation hides of it (an exchange that starts while backward runs):

    step = compute + codec + overhead + max(0, exchange - hidden),   hidden = backward share x compute (overlapped)

where the hidden part, where a calibration link measured it (its exposed wait against the exchange there), is
that measurement, still at most the backward share of the compute; and the overhead, for an exchange that waits
whole (not overlapped), is what the calibration link measured beyond the bytes over the bandwidth: the
per-message costs of the transport, the servers' own work (a fixed cost per step, whatever the link).

The exchange of B bytes per worker (B' received by each worker from a server) on W = nodes x per_node workers,
links of bandwidth b between nodes and b_in within one, latency a per message:

- ring all-reduce: 2 (W-1)/W x B / b + 2 (W-1) a; on several nodes of several workers each, hierarchically:
  2 (G-1)/G x B / b_in within the node, then 2 (N-1)/N x B / b between the N nodes (one worker per node carries
  the node's sum), plus the latencies of both rings;
- all-gather (each worker's own payload to every other): (W-1) x B / b + (W-1) a; across nodes, each node
  receives the (N-1) x G payloads of the others over its link: (N-1) G B / b, plus (G-1) B / b_in within;
- parameter servers (S of them, each on its own link): the busiest link carries W/S of the pushes in and of the
  pulls out, a worker's own link one of each: max(1, W/S) x (B + B') / b + 2 a.

A method whose bytes per step change over a run (PowerSGD all-reduces the full gradient for its first
``start_iter`` steps) is timed segment by segment: each seed's steps to the target in stretches of constant bytes
per step (from its history's cumulative bytes), each stretch at its own step time. A mean over the run would
spread the full-gradient steps thinly and, the exposed wait not being linear in the bytes, predict short.

A link's bandwidth counts its frames, not its payload: ``payload_share`` of its bytes are the gradient's (1 for a
rate given as payload; TCP over Ethernet behind a rate limiter carries less, see ``TCP_ETHERNET_SHARE``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

TOPOLOGIES = ("allreduce", "allgather", "ps")
# TCP/IPv4 over Ethernet, as tc's tbf counts it (the frame without preamble and FCS): a 1,514-byte frame carries
# 1,448 payload bytes (1,500 MTU less 20 IP and 32 TCP bytes with timestamps; 14 of Ethernet header), and the
# other direction's data is acknowledged on the same link, a 66-byte ACK for every 2 segments: 1,448 / (1,514 +
# 33). The emulated links' records measure 5.2-5.7% more bytes on the wire than their payload at 100 Mbit/s
# (where tbf splits the segments into frames); this share is 6.8%, from the header arithmetic alone.
TCP_ETHERNET_SHARE = 1448 / (1514 + 33)


@dataclass(frozen=True)
class Links:
    """A cluster's shape and links: ``nodes`` x ``per_node`` workers, bytes/s between and within nodes."""

    nodes: int
    per_node: int
    between_bytes_s: float
    within_bytes_s: float | None = None   # None: every worker on its own node's link
    latency_s: float = 0.0
    payload_share: float = 1.0            # of the bytes a link carries, the payload's share (framing: 1 - it)

    @property
    def workers(self) -> int:
        return self.nodes * self.per_node

    def within(self) -> float:
        return self.within_bytes_s or self.between()  # a node's own interconnect carries no network framing

    def between(self) -> float:
        return self.between_bytes_s * self.payload_share


def exchange_s(topology: str, links: Links, sent: float, received: float | None = None, servers: int = 1) -> float:
    """Seconds one step's exchange takes: ``sent`` bytes per worker (its payload, or its full gradient for an
    all-reduce), ``received`` what a server sends back to each worker (parameter servers only)."""
    w, n, g, a = links.workers, links.nodes, links.per_node, links.latency_s
    if w == 1:
        return 0.0
    if topology == "allreduce":
        if n > 1 and g > 1:
            return (2 * (g - 1) / g * sent / links.within() + 2 * (n - 1) / n * sent / links.between()
                    + 2 * (g - 1 + n - 1) * a)
        return 2 * (w - 1) / w * sent / links.between() + 2 * (w - 1) * a
    if topology == "allgather":
        if n > 1 and g > 1:
            return (n - 1) * g * sent / links.between() + (g - 1) * sent / links.within() + (w - 1) * a
        return (w - 1) * sent / links.between() + (w - 1) * a
    if topology == "ps":
        back = sent if received is None else received
        return max(1.0, w / servers) * (sent + back) / links.between() + 2 * a
    raise ValueError(f"topology: one of {', '.join(TOPOLOGIES)}, got {topology!r}")


@dataclass(frozen=True)
class Segment:
    """A stretch of a run at one cost per step: ``steps`` steps of ``sent`` bytes per worker (``received`` from the
    servers, parameter servers only)."""

    steps: float
    sent: float
    received: float | None = None


@dataclass(frozen=True)
class Arm:
    """One method as the projection needs it: measured steps to the target and per-step costs."""

    label: str
    topology: str
    steps_to_target: float | None   # mean over seeds; None: not reached within the horizon
    sent: float                     # bytes per worker per step
    received: float | None = None   # from the servers (ps)
    servers: int = 1
    codec_s: float = 0.0            # encode + decode per step
    overlapped: bool = False        # the exchange starts while backward runs
    hidden_s: float | None = None   # what computation hid of the exchange, as measured (None: the bound)
    overhead_s: float = 0.0         # per step, the exchange's cost beyond its bytes over the bandwidth (measured)
    # each seed's steps to the target in segments of constant bytes per step (empty: steps_to_target x sent)
    runs: tuple[tuple[Segment, ...], ...] = ()


def step_s(arm: Arm, links: Links, compute_s: float, backward_share: float = 2 / 3) -> float:
    """One step on ``links``: compute + codec + the exchange that computation does not hide."""
    exchange = exchange_s(arm.topology, links, arm.sent, arm.received, arm.servers)
    bound = backward_share * compute_s if arm.overlapped else 0.0
    hidden = bound if arm.hidden_s is None else min(arm.hidden_s, bound)
    return compute_s + arm.codec_s + arm.overhead_s + max(0.0, exchange - hidden)


def segments_s(arm: Arm, segments, links: Links, compute_s: float, backward_share: float = 2 / 3) -> float:
    """Seconds ``segments`` take, each stretch at the step time of its own bytes."""
    return sum(seg.steps * step_s(replace(arm, sent=seg.sent, received=seg.received), links, compute_s, backward_share)
               for seg in segments)


def time_to_target_s(arm: Arm, links: Links, compute_s: float, backward_share: float = 2 / 3) -> float | None:
    """The mean over seeds of the time to the target (segment by segment where the arm has its runs' segments)."""
    if arm.steps_to_target is None:
        return None
    if arm.runs:
        return sum(segments_s(arm, run, links, compute_s, backward_share) for run in arm.runs) / len(arm.runs)
    return arm.steps_to_target * step_s(arm, links, compute_s, backward_share)


def relative_error(predicted: float | None, measured: float | None) -> float | None:
    """predicted / measured - 1 (0.12: 12% too slow a prediction)."""
    if predicted is None or not measured:
        return None
    return predicted / measured - 1
