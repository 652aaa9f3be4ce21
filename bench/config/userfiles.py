"""Users' files (grids, Slurm profiles) and ``--set`` values as text and YAML, refusing what would hang or
exhaust the reader: bytes that are not UTF-8, alias bombs, nesting deeper than any grid needs."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from commbench.config.errors import ConfigError

# A YAML document is a graph: an alias reuses a node, so 400 bytes of nested aliases stand for billions of
# values, which anything that walks the result (printing, hashing a run id) expands. Refused past this size.
MAX_YAML_VALUES = 100_000


MAX_YAML_DEPTH = 100  # nesting deeper than any grid or profile needs (a deeper document exhausts the parser)


def _depth(text: str) -> int:
    """An upper bound of a YAML document's nesting: the most brackets open at once, or its deepest indent."""
    deepest = level = 0
    for ch in text:
        if ch in "[{":
            level += 1
            deepest = max(deepest, level)
        elif ch in "]}":
            level -= 1
    return deepest


def read_user_text(path: Path) -> str:
    """A user's file (a grid, a profile) as UTF-8 text, or ConfigError naming it."""
    try:
        return Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text (save it as UTF-8)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def load_yaml(text: str, what: str) -> Any:
    """``yaml.safe_load`` for text from users (grids, profiles, --set values), refusing documents whose aliases
    expand past :data:`MAX_YAML_VALUES` values. Raises ConfigError (naming ``what``) or yaml.YAMLError."""
    if _depth(text) > MAX_YAML_DEPTH:
        raise ConfigError(f"{what}: nested more than {MAX_YAML_DEPTH} levels deep; refused")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise ConfigError(f"{what}: nested too deeply; refused") from None
    if node is not None:
        sizes: dict[int, int] = {}

        def size(n) -> int:
            if id(n) in sizes:
                return sizes[id(n)]
            sizes[id(n)] = MAX_YAML_VALUES + 1  # a node that contains itself expands without end
            if isinstance(n, yaml.SequenceNode):
                total = 1 + sum(size(c) for c in n.value)
            elif isinstance(n, yaml.MappingNode):
                total = 1 + sum(size(k) + size(v) for k, v in n.value)
            else:
                total = 1
            sizes[id(n)] = min(total, MAX_YAML_VALUES + 1)
            return sizes[id(n)]

        if size(node) > MAX_YAML_VALUES:
            raise ConfigError(f"{what}: its YAML aliases expand to more than {MAX_YAML_VALUES:,} values; refused")
    try:
        return yaml.safe_load(text)
    except ValueError as exc:  # an integer of thousands of digits: Python refuses to convert it
        raise ConfigError(f"{what}: {str(exc).split(';')[0]}") from None


