"""Every campaign grid is run by a make target (make campaign, campaign-net or campaign-2node): a grid that no
target names would never be resumed, and its rows would read missing without anyone noticing."""
from __future__ import annotations

import re

from ..conftest import REPO


def named_by_makefile(stem: str, makefile: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(stem)}(?![\w-])", makefile) is not None


def test_every_campaign_grid_is_run_by_a_make_target():
    makefile = (REPO / "Makefile").read_text()
    grids = sorted(p.stem for p in (REPO / "bench" / "grids" / "campaign").glob("*.yaml"))
    assert "ssdsgd-table2-lenet" in grids
    assert [g for g in grids if not named_by_makefile(g, makefile)] == []


def test_a_grid_is_not_taken_for_named_by_a_longer_name():
    assert not named_by_makefile("ssdsgd-table2", "CAMPAIGN = ssdsgd-table2-half ssdsgd-table2-lenet")
    assert named_by_makefile("ssdsgd-table2", "CAMPAIGN = ssdsgd-table2-half ssdsgd-table2\n")
