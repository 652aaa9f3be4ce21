"""The papers' reference values (``results/paper/<paper>.csv``) and the stand-ins the campaign trains.

Each CSV row is one number a paper reports, with the configuration columns that identify it. The files are
transcribed from the papers by hand and checked against the papers' text by tests/analysis/test_paper_values.py;
nothing here computes them.
"""
from __future__ import annotations

import csv
import importlib.resources
from dataclasses import dataclass
from pathlib import Path


from commbench.config import ConfigError, load_yaml
from commbench.config.grid import GRIDS_DIR, Declaration, load_grid
# the reference tables ship with the package (commbench.paper_data: results/paper in a checkout, bench/layout.py)
PAPER_DIR = Path(str(importlib.resources.files("commbench.paper_data")))
PAPERS = {"terngrad": "TernGrad (Wen et al., NeurIPS 2017)",
          "threshold": "Thresholded gradient synchronization (Anoosheh et al.)",
          "ssdsgd": "SSD-SGD (Xu et al.)",
          # a peer's reproduction, judged by the same rule: its released runs of a paper's method
          "grace": "GRACE's released runs (sands-lab: a peer's reproduction of TernGrad, single runs)"}
# a peer's rows are its own recipe's runs: the recipe that reproduces its setting (tasks/ name it), and only it
PEER_RECIPES = {"grace": "grace"}
COLUMNS = ["paper", "source", "row", "task", "dataset", "method", "workers", "global_batch", "batch_per_worker",
           "base_lr", "optimizer", "threshold", "delay_steps", "warmup_steps", "iterations", "variant", "metric", "value",
           "unit", "claim", "margin", "reports", "note"]
_INT = ("workers", "global_batch", "batch_per_worker", "delay_steps", "warmup_steps", "iterations")
_FLOAT = ("base_lr", "threshold", "value", "margin")
# what a row claims, and so how it is judged (bench/analysis/papers/verdicts.py, docs/papers.md)
CLAIMS = {"value": "an absolute value", "gap": "an effect of a stated size (a method against its baseline or a "
          "sibling variant)", "no_loss": "no loss against the baseline", "bound": "a value below a stated bound",
          "sign": "a direction only", "ordering": "the paper's choice is the best of a sweep",
          "speedup": "a speed-up", "count": "a count that describes a model"}
# the metrics of a row that are speeds (a stand-in model's speeds say nothing about the paper's model)
SPEED_METRICS = {"throughput_images_per_s", "speedup", "speedup_pct", "speedup_pct_min", "speedup_pct_max"}
REPORTS = ("final", "best")  # which accuracy of a run the paper reports: the last evaluation's, or the best one's
# the margins that accuracy claims must carry, fixed from the paper's numbers before any run (docs/papers.md):
# an effect g gets min(0.5, 0.5 |g|) points, at least 0.25, so that no effect can never reproduce a claimed one;
# "no loss" and an absolute accuracy get 0.5 points of practical equivalence
EFFECT_MARGIN_MAX, EFFECT_MARGIN_SHARE, EFFECT_MARGIN_FLOOR = 0.5, 0.5, 0.25
EQUIVALENCE_MARGIN = 0.5


def effect_margin(gap: float) -> float:
    """The margin of a claimed effect of ``gap`` points (rounded to 3 decimals, as the reference tables hold it)."""
    return round(max(EFFECT_MARGIN_FLOOR, min(EFFECT_MARGIN_MAX, EFFECT_MARGIN_SHARE * abs(gap))), 3)


@dataclass(frozen=True)
class Reference:
    """One reported number and the setting it was reported for (None: the paper does not say)."""

    paper: str
    source: str
    row: str
    task: str | None
    dataset: str | None
    method: str | None
    workers: int | None
    global_batch: int | None
    batch_per_worker: int | None
    base_lr: float | None
    optimizer: str | None
    threshold: float | None
    delay_steps: int | None
    warmup_steps: int | None
    iterations: int | None  # the paper's training length for this row, where it states one
    variant: str | None
    metric: str
    value: float
    unit: str
    claim: str | None
    margin: float | None  # points for accuracies; a share in % for bytes and counts; a factor for speed-ups
    reports: str | None   # final or best: which accuracy of a run the paper reports
    note: str | None
    printed: str = ""  # the value exactly as the paper printed it ("56.2720", "89.00")

    @property
    def variants(self) -> set[str]:
        return {v.strip() for v in (self.variant or "").replace(";", ",").split(",") if v.strip()}

    def setting(self) -> str:
        """The identifying configuration, short: what a reader needs to find the row in the paper."""
        parts = [self.task, self.method, self.variant and f"[{self.variant}]",
                 self.workers and f"{self.workers} workers",
                 self.global_batch and f"batch {self.global_batch}",
                 self.batch_per_worker and f"{self.batch_per_worker}/worker",
                 self.threshold is not None and f"T={self.threshold:g}",
                 self.delay_steps is not None and f"k={self.delay_steps}",
                 self.warmup_steps is not None and f"warm-up {self.warmup_steps}"]
        return ", ".join(p for p in parts if p)


def _parse(path: Path, line: int, row: dict) -> Reference:
    values: dict = {}
    for key in COLUMNS:
        text = (row.get(key) or "").strip()
        if key in _INT:
            try:
                values[key] = int(text) if text else None
            except ValueError:
                raise ConfigError(f"{path}:{line}: {key} must be an integer, got {text!r}") from None
        elif key in _FLOAT:
            try:
                values[key] = float(text.replace(",", "")) if text else None
            except ValueError:
                raise ConfigError(f"{path}:{line}: {key} must be a number, got {text!r}") from None
        else:
            values[key] = text or None
    if values["value"] is None or not values["metric"]:
        raise ConfigError(f"{path}:{line}: a reference row needs a metric and a value")
    if values["claim"] not in CLAIMS:
        raise ConfigError(f"{path}:{line}: claim must be one of {', '.join(CLAIMS)}, got {values['claim']!r}")
    if values["reports"] not in (None, *REPORTS):
        raise ConfigError(f"{path}:{line}: reports must be final or best, got {values['reports']!r}")
    values["unit"] = values["unit"] or ""
    return Reference(**values, printed=(row.get("value") or "").strip())


def load_references(paper: str, folder: Path = PAPER_DIR) -> list[Reference]:
    """Every reference row of one paper, in the paper's own order."""
    if paper not in PAPERS:
        raise ConfigError(f"--paper {paper!r}: unknown paper (known: {', '.join(PAPERS)}, all)")
    path = Path(folder) / f"{paper}.csv"
    if not path.is_file():
        raise ConfigError(f"{path}: no reference values for {paper}")
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != COLUMNS:
            raise ConfigError(f"{path}: columns must be {','.join(COLUMNS)}")
        return [_parse(path, i + 2, row) for i, row in enumerate(reader)]


@dataclass(frozen=True)
class Analogue:
    """A paper setting this machine cannot train, and what the campaign trains in its place."""

    paper: str
    task: str
    use: dict  # match keys replaced: task, workers, global_batch
    reason: str
    # the paper's tables or sections (its rows' `source`) that are the stand-in's, every row of them, even one the
    # paper's own model ran (a figure's sweep is one model's); the own model's runs alone fill the task's other
    # rows. Empty: the stand-in fills any row of the task that no run of the paper's own model fills
    sources: tuple[str, ...] = ()


def load_analogues(folder: Path = PAPER_DIR) -> list[Analogue]:
    path = Path(folder) / "analogues.yaml"
    if not path.is_file():
        return []
    doc = load_yaml(path.read_text(), str(path)) or []
    out = []
    for i, entry in enumerate(doc):
        if not isinstance(entry, dict) or not {"paper", "task", "use"} <= set(entry):
            raise ConfigError(f"{path}: entry {i + 1} needs paper, task and use")
        unknown = set(entry["use"]) - {"task", "workers", "global_batch"}
        if unknown:
            raise ConfigError(f"{path}: entry {i + 1}: use may replace task, workers, global_batch; "
                              f"not {', '.join(sorted(unknown))}")
        sources = entry.get("sources", [])
        if not isinstance(sources, list) or not all(isinstance(x, str) and x for x in sources):
            raise ConfigError(f"{path}: entry {i + 1}: sources must be a list of the paper's tables or sections "
                              f"(a row's source), got {sources!r}")
        out.append(Analogue(entry["paper"], entry["task"], dict(entry["use"]), entry.get("reason", ""),
                            tuple(sources)))
    return out


def load_declarations(folder: Path = GRIDS_DIR) -> list[Declaration]:
    """Every grid's declared stand-ins for the papers' speed rows (a grid's ``declares``), from the grids the
    package ships: written before the grid ran, they say which measurements judge a row."""
    return [d for path in sorted(Path(folder).rglob("*.yaml")) for d in load_grid(path).declares]
