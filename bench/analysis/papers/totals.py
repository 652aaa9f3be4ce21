"""The count of the papers' verdicts: per section, and the totals line that ends every rendering of the tables
(the README quotes it, and tests read it as the last line).

The totals give three counts, by what a row was judged on (``standing``): the papers' settings (substitute data
included, named as such in each row), stand-in models (whose rows say whether a finding transferred), and
arithmetic (sizes and bytes from a model's parameter count). A row that repeats another (``same as``) is left
out. What can be signed of the errors: how many rows were called by a test at a per-row error of at most 5%, and
how many of those share their baseline runs with another (their errors are correlated).
"""
from __future__ import annotations

from commbench.analysis.papers import standing
from commbench.analysis.papers.verdicts import (DID_NOT_TRANSFER, INCONCLUSIVE, MISSING, NOT_REPRODUCED, REPRODUCED,
                                                TRANSFERRED, UNTESTABLE, VERDICTS, called_from_an_interval)

ORDER = (REPRODUCED, NOT_REPRODUCED, TRANSFERRED, DID_NOT_TRANSFER, INCONCLUSIVE, UNTESTABLE, MISSING)
# the totals' three groups, and the verdicts each can hold
GROUPS = (("the papers' settings (substitute data included)", (standing.PAPER, standing.SUBSTITUTE), VERDICTS),
          ("stand-in models", (standing.STAND_IN,),
           (TRANSFERRED, DID_NOT_TRANSFER, INCONCLUSIVE, UNTESTABLE, MISSING)),
          ("arithmetic", (standing.ARITHMETIC,), (REPRODUCED, NOT_REPRODUCED)))


def counted(row: dict) -> str:
    return row["_verdict"].counted if "_verdict" in row else row["verdict"]


def verdict_counts(group: list[dict]) -> str:
    """"N reproduced, M not reproduced, ...": every verdict of the papers' settings named, a stand-in's where
    there is one."""
    counts = {v: sum(counted(r) == v for r in group) for v in ORDER}
    return ", ".join(f"{n} {v}" for v, n in counts.items() if n or v in VERDICTS)


def summary(table: list[dict]) -> dict:
    """Every count the totals line states, by group, as numbers."""
    kept = [r for r in table if not r.get("same as")]
    out: dict = {"rows": len(table), "repeats": len(table) - len(kept)}
    for name, judged, verdicts in GROUPS:
        members = [r for r in kept if r.get("judged on", standing.PAPER) in judged]
        out[name] = {"rows": len(members), **{v: sum(counted(r) == v for r in members) for v in verdicts}}
    called = [r for r in kept if "_verdict" in r and called_from_an_interval(r["_verdict"])]
    out["called from an interval"] = len(called)
    out["sharing a baseline"] = sum(bool(r.get("shares baseline with")) for r in called)
    return out


def totals_line(table: list[dict]) -> str:
    s = summary(table)
    repeats = f" ({s['repeats']} repeat another row and are not counted)" if s["repeats"] else ""
    groups = "; ".join(f"{name}, {s[name]['rows']} rows: "
                       + ", ".join(f"{s[name][v]} {v}" for v in verdicts) for name, _, verdicts in GROUPS)
    return (f"Totals over {s['rows']} rows{repeats}: {groups}. {s['called from an interval']} rows were called by a "
            f"test at a per-row error of at most 5%; {s['sharing a baseline']} of them share their baseline runs "
            f"with another called row, so their errors are correlated (the CSV's shares baseline with).")
