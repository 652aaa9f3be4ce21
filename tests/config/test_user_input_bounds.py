"""The bounds on what users give (files, lists, sizes, output paths) and the scanner that bounds YAML nesting:
each refusal is a ConfigError naming the item, and what is valid still reads."""
from __future__ import annotations

import pytest

from commbench.config import ConfigError
from commbench.config.parsers import int_list, output_file, output_folder, shown, size_bytes
from commbench.config.userfiles import MAX_YAML_DEPTH, _depth, load_yaml


@pytest.mark.parametrize("text, depth", [
    ("a: [1, [2, [3]]]", 3),
    ("description: '" + "[" * 150 + "'\naxes: {a: [1]}", 2),           # single-quoted text
    ('description: "' + "[" * 150 + '\\" [["\naxes: {a: [1]}', 2),      # double-quoted, with an escaped quote
    ("- 'it''s [[[' \n- [[1]]", 2),                                       # '' inside single quotes
    ("# " + "[" * 150 + "\na: [1]", 1),                                   # a comment
    ("description: a plain [[[[ text\nx: [1]", 1),                        # plain text of the block context
    ("description: |\n  [[[[[\n  {{{{\nx: [[1]]", 2),                    # a block scalar
    ("- key: >-\n    text [[[[\n  other: [[[x]]]", 3),                    # the block ends where its indent does
    ("x: don't [[[[", 0),                                                 # an apostrophe opens no quote mid-text
    ("[a 'b, [[[[]]]]]", 5),                                              # nor inside brackets mid-scalar
    ("[&a,[[[[]]]]]", 5),                                                 # an anchor is a name, then its node
    ("a: !!seq [[1]]", 2),
    ("{'a': [1]}", 2),
])
def test_the_depth_counts_brackets_that_nest_and_only_those(text, depth):
    assert _depth(text) == depth


def test_the_depth_scan_stops_once_past_the_limit():
    assert _depth("[" * 1_000_000) == MAX_YAML_DEPTH + 1


def test_a_repeated_key_is_refused_but_a_merge_is_not():
    with pytest.raises(ConfigError, match=r"g\.yaml: key 'seed' appears twice .*line 2"):
        load_yaml("seed: 1\nseed: 2\n", "g.yaml")
    assert load_yaml("x: &m {a: 1}\ny:\n  <<: *m\n  a: 2\n", "g.yaml") == {"x": {"a": 1}, "y": {"a": 2}}


@pytest.mark.parametrize("text, says", [
    ("1..10001", "10,001 values, more than the 10,000"),
    (",".join(["1"] * 10_001), "10,001 values"),
    ("1,2000000", "2000000 is more than 1,000,000"),
    ("0..2", "need positive integers"),
    ("1..x", "cannot read"),
])
def test_an_int_list_is_bounded_before_it_is_made(text, says):
    with pytest.raises(ConfigError, match=f"--nodes: .*{says}"):
        int_list(text, "--nodes")
    assert int_list("1..3", "--nodes") == [1, 2, 3] and int_list("1,2,4", "--k") == [1, 2, 4]


def test_a_size_is_bounded_where_a_maximum_is_given():
    assert size_bytes("1GiB") == 2 ** 30
    with pytest.raises(ConfigError, match=r"--sizes: '2GiB' is more than 1 GiB"):
        size_bytes("2GiB", "--sizes", 2 ** 30)


def test_output_paths_are_checked_as_given(tmp_path):
    (tmp_path / "afile").write_text("x")
    assert output_file("--out", str(tmp_path / "new" / "t.md")) == tmp_path / "new" / "t.md"
    assert output_folder("--out", str(tmp_path / "a" / "b")) == tmp_path / "a" / "b"
    for check, path, says in ((output_file, tmp_path, "a folder"),
                              (output_file, tmp_path / "afile" / "t.md", "is a file, not a folder"),
                              (output_folder, tmp_path / "afile", "is a file, not a folder"),
                              (output_folder, "/proc/self/x", "system folder"),
                              (output_file, "/sys/x.md", "system folder"),
                              (output_file, "", "an empty path")):
        with pytest.raises(ConfigError, match=f"--out {path}.*{says}" if str(path) else says):
            check("--out", str(path))
    assert not [p for p in tmp_path.rglob("*") if p.name != "afile"]  # the checks made nothing


def test_an_echoed_value_is_cut_to_a_line():
    assert shown("abc") == "'abc'"
    assert len(shown("a" * 100_000)) == 80 and shown("a" * 100_000).endswith("…")


def test_the_tta_table_reads_as_numbers_a_person_reads():
    from commbench.analysis.perfmodel.tta_tables import readable

    (row,) = readable([{"where": "100mbit", "method": "fp16", "steps to target": 380.0, "predicted s": 28.93,
                        "measured s": 1234.4, "held-out error": -0.0321, "within 20%": True, "vs strongest": 0.5412}])
    assert row == {"where": "100mbit", "method": "fp16", "steps to target": "380", "predicted s": "28.9",
                   "measured s": "1,234", "held-out error": "-3.2%", "within 20%": "yes", "vs strongest": "0.54x"}
    (empty,) = readable([{"measured s": None, "within 20%": None, "held-out error": 0.0}])
    assert empty == {"measured s": "—", "within 20%": "—", "held-out error": "0.0%"}


def test_every_shipped_grid_profile_and_cluster_still_reads():
    """The stricter reading (no key twice, a setting on one axis only, at most 1 MiB) refuses none of the files
    the project ships."""
    from commbench.analysis.perfmodel import clusters
    from commbench.config.grid import load_grid, shipped_grids
    from commbench.launch.profile import known_profiles, load_profile

    for path in shipped_grids().values():
        load_grid(path)
    for name in known_profiles():
        load_profile(name)
    for name in clusters.shipped():
        clusters.load(name)
