"""The performance models' headline result for ``commbench report``: TernGrad Figure 5's 3.04x, checked."""
from __future__ import annotations

from commbench.analysis.perfmodel.terngrad import figure5_speedup


def report_blocks() -> list[dict]:
    """Blocks (kind, text, header, body) for the report: the modelled speed-up beside the paper's."""
    r = figure5_speedup()
    header = ("TernGrad variant", "|g| per worker (bytes)", "modelled speed-up", "paper", "compute for the paper's value")
    body = tuple((name, f"{v['terngrad_grad_bytes']:,.0f}", f"{v['speedup']:.2f}x", f"{r['paper_speedup']:.2f}x",
                  f"{v['compute_s_for_paper_speedup']:.3f} s per {r['batch_per_gpu']} images "
                  f"({v['utilization_for_paper_speedup']:.1%} of peak)")
                 for name, v in r["variants"].items())
    reproduced = any(abs(v["speedup"] - r["paper_speedup"]) / r["paper_speedup"] < 0.05 for v in r["variants"].values())
    return [
        {"kind": "h2", "text": "Performance model: TernGrad Figure 5"},
        {"kind": "p", "text": (
            f"{r['task']} on {r['gpus']} GPUs ({r['gpus_per_node']} per node, {r['nodes']} nodes) over 1 Gbit/s, "
            f"{r['batch_per_gpu']} images per GPU, weak scaling (supplement Eq. 8-9); baseline |g| "
            f"{r['baseline_grad_bytes']:,.0f} bytes from the byte ledger; compute {r['compute_s']:.4f} s per step "
            f"(counted FLOPs at {r['utilization']:.0%} of a GTX 1080's peak, an assumption: the paper gives none). "
            + ("The model reproduces the paper's 3.04x." if reproduced else
               "The model does not reproduce the paper's 3.04x under these assumptions; the last column is the "
               "compute time per step that would."))},
        {"kind": "table", "header": header, "body": body},
    ]
