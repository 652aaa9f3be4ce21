"""The layout of a results folder, named in one place: every module that reads or writes one asks
:class:`ResultsFolder` where a thing lives, so the layout cannot drift apart between its writers and readers::

    RESULTS/
    ├── runs/<run_id>.json              a run's record (store.records); an unreadable one is moved aside
    │                                   beside it, as <run_id>.json.unreadable-<time>
    ├── checkpoints/<run_id>/           a run's checkpoints: latest.json and its step-* folders (run.checkpoint)
    ├── claims/<run_id>.lock            the claim of the process training a run here (launch.owner)
    ├── claims/<run_id>.progress        how far that run is, for ``commbench status`` (launch.progress)
    ├── logs/<run_id>/                  one log per process of a run launched here (launch.local)
    ├── weights/<run_id>.pt             worker 0's final weights (``run --save-weights``)
    ├── slurm/code/                     the frozen copy of the code the jobs run (launch.snapshot)
    ├── slurm/batches/<time>-<pid>/     one submission's job folders (launch.slurm)
    ├── slurm/jobs/<run_id>.json        the note of a run's submitted job (launch.queue)
    ├── figures/                        ``commbench plot``'s figures (its default --out)
    ├── report/                         ``commbench report``'s document (its default --out): see ReportFolder
    └── campaign/                       the project's own results/ holds its campaign: a results folder too

The readers look for records and checkpoints at any depth below the folder they are given (a folder of results
folders reads as one), so the globs below are written from the same names.

Pure paths: nothing here reads or writes a file.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

RUNS, CHECKPOINTS, CLAIMS, LOGS, WEIGHTS = "runs", "checkpoints", "claims", "logs", "weights"
SLURM, FIGURES, REPORT, CAMPAIGN = "slurm", "figures", "report", "campaign"
CHECKPOINT_INDEX = "latest.json"  # the checkpoint in force, in a run's checkpoint folder (run.checkpoint)


@dataclass(frozen=True)
class ResultsFolder:
    """A results folder (``root``) and where each of its things lives. ``ResultsFolder.of`` takes a path or one."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))  # a str given by a caller reads as a path

    @classmethod
    def of(cls, folder: "ResultsFolder | str | Path") -> "ResultsFolder":
        return folder if isinstance(folder, ResultsFolder) else cls(Path(folder))

    @classmethod
    def holding(cls, entry: Path) -> "ResultsFolder":
        """The results folder a run's entry lies in, for an entry directly in one of its folders (a record, a
        checkpoint or log folder, a claim, a progress or weights file): writers use it as the folder below
        which nothing is written through a link."""
        return cls(Path(entry).parent.parent)

    # -- records --------------------------------------------------------------------------------------------
    @property
    def runs(self) -> Path:
        return self.root / RUNS

    def record(self, run_id: str) -> Path:
        return self.runs / f"{run_id}.json"

    # -- a run's files while and after it trains -----------------------------------------------------------
    def checkpoints(self, run_id: str) -> Path:
        return self.root / CHECKPOINTS / run_id

    def checkpoint_index(self, run_id: str) -> Path:
        return self.checkpoints(run_id) / CHECKPOINT_INDEX

    @property
    def claims(self) -> Path:
        return self.root / CLAIMS

    def progress(self, run_id: str) -> Path:
        """Where a claimed run says how far it is, beside its claim."""
        return self.claims / f"{run_id}.progress"

    def logs(self, run_id: str) -> Path:
        return self.root / LOGS / run_id

    def weights(self, run_id: str) -> Path:
        return self.root / WEIGHTS / f"{run_id}.pt"

    # -- Slurm submissions ----------------------------------------------------------------------------------
    @property
    def slurm_code(self) -> Path:
        return self.root / SLURM / "code"

    def slurm_batch(self, name: str) -> Path:
        """One submission's folder of job folders (``name``: when and by which process it was submitted)."""
        return self.root / SLURM / "batches" / name

    @property
    def slurm_jobs(self) -> Path:
        return self.root / SLURM / "jobs"

    def job_note(self, run_id: str) -> Path:
        return self.slurm_jobs / f"{run_id}.json"

    # -- what the reading commands write by default --------------------------------------------------------
    @property
    def figures(self) -> Path:
        return self.root / FIGURES

    @property
    def report(self) -> "ReportFolder":
        return ReportFolder(self.root / REPORT)

    @property
    def campaign(self) -> "ResultsFolder":
        return ResultsFolder(self.root / CAMPAIGN)

    # -- every results folder below this one ---------------------------------------------------------------
    def record_files(self) -> Iterator[Path]:
        """Every record file below the folder (any ``runs/`` at any depth), in path order."""
        return iter(sorted(self.root.rglob(f"{RUNS}/*.json")))

    def checkpoint_indexes(self) -> Iterator[Path]:
        """Every checkpoint index below the folder (any ``checkpoints/<run_id>/`` at any depth), in path order;
        ``ResultsFolder.holding(index.parent)`` is the results folder of one."""
        return iter(sorted(self.root.rglob(f"{CHECKPOINTS}/*/{CHECKPOINT_INDEX}")))


@dataclass(frozen=True)
class ReportFolder:
    """What ``commbench report`` writes into its folder (``RESULTS/report`` unless told another)."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def markdown(self) -> Path:
        return self.root / "report.md"

    @property
    def page(self) -> Path:
        return self.root / "report.html"

    @property
    def figures(self) -> Path:
        return self.root / FIGURES
