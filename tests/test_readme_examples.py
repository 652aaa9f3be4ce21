"""The README's example outputs stay true: each ``commbench ...`` line in a shell block followed by ``# ...`` lines
is run here and its output compared (run ids and bytes exactly; top-1 to within 0.5 points; images/s, a
machine's speed, only in form). An example whose printed line ends in ``...`` is compared up to it."""
from __future__ import annotations

import re
import shlex

import pytest

from .conftest import REPO, commbench

FENCE = re.compile(r"```sh\n(.*?)```", re.S)
INLINE_COMMENT = re.compile(r"\s{2,}#.*$")
OPTIONAL = re.compile(r"\s\[[^\]]*\]")  # `[--format csv]`: an option the README offers, left out here


def examples() -> list[tuple[str, list[str]]]:
    """(command, the output lines the README shows under it), for every command that shows some."""
    found = []
    for block in FENCE.findall((REPO / "README.md").read_text()):
        command = None
        for line in block.splitlines():
            if line.startswith("commbench "):
                command = INLINE_COMMENT.sub("", line).strip()
                found.append((command, []))
            elif line.startswith("# ") and command:
                found[-1][1].append(line[2:])
            else:
                command = None
    return [(c, shown) for c, shown in found if shown]


def shown_for(word: str, *flags: str) -> list[tuple[list[str], list[str]]]:
    """The examples of ``commbench WORD`` with every one of ``flags``, as argument lists."""
    picked = [(shlex.split(OPTIONAL.sub("", c))[1:], shown) for c, shown in examples() if c.split()[1] == word]
    return [(args, shown) for args, shown in picked if all(f in args for f in flags)]


def agrees(shown: str, printed: str) -> bool:
    shown = shown.rstrip()
    return printed.startswith(shown[:-3].rstrip()) if shown.endswith("...") else printed.rstrip() == shown


def test_the_readme_has_the_examples_this_file_checks():
    assert shown_for("run") and shown_for("sweep", "--dry-run") and shown_for("status") and shown_for("table")


@pytest.mark.parametrize("args, shown", shown_for("sweep", "--dry-run"), ids=lambda v: " ".join(v)[:40])
def test_a_dry_run_prints_the_lines_the_readme_shows(args, shown):
    done = commbench(*args, timeout=120)
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    for line in shown:
        assert any(agrees(line, p) for p in printed), f"README shows {line!r}; the sweep prints:\n{done.stdout}"


@pytest.mark.parametrize("args, shown", [*shown_for("status"), *shown_for("table")], ids=lambda v: " ".join(v)[:40])
def test_status_and_table_of_committed_records_print_what_the_readme_shows(args, shown):
    done = commbench(*args, timeout=300)
    assert done.returncode == 0, done.stderr
    squeeze = lambda text: re.sub(r"\s+", " ", text).strip()  # noqa: E731 (a table's padding follows its widths)
    printed = [squeeze(p) for p in done.stdout.splitlines()]
    for line in shown:
        assert any(agrees(squeeze(line), p) for p in printed), f"README shows {line!r}; got:\n{done.stdout[:3000]}"


RUN_LINE = re.compile(r"^(?P<run_id>\S+): (?P<status>\w+)  top1 (?P<top1>[\d.]+)  sent (?P<gb>[\d.]+) GB "
                      r"\(all workers\)  images/s \d+$")


@pytest.mark.parametrize("args, shown", shown_for("run"), ids=lambda v: " ".join(v)[:40])
def test_the_run_example_gives_the_run_id_accuracy_and_bytes_the_readme_shows(args, shown, data_root, tmp_path):
    """The full run, as the README types it (300 steps of two gloo workers, under a minute): its id and bytes
    exactly, its top-1 to within 0.5 points (a seeded run repeats it bit for bit on one kind of CPU; another
    kind's kernels may round differently and move a few of the 10,000 test images)."""
    expected = RUN_LINE.match(shown[0])
    assert expected, f"the README's run line is not the form `run` prints: {shown[0]!r}"
    done = commbench(*args, "--results", str(tmp_path), "--data-root", str(data_root), "--quiet", timeout=600)
    assert done.returncode == 0, done.stderr
    printed = RUN_LINE.match(done.stdout.strip().splitlines()[-1])
    assert printed, done.stdout
    assert printed.group("run_id", "status", "gb") == expected.group("run_id", "status", "gb")
    assert abs(float(printed.group("top1")) - float(expected.group("top1"))) <= 0.005, (shown[0], done.stdout)
