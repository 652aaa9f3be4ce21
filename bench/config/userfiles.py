"""Users' files (grids, Slurm profiles, cluster profiles) and ``--set`` values as text and YAML, refusing what would
hang or exhaust the reader: a FIFO or device, a file larger than any such file needs, bytes that are not UTF-8,
alias bombs, nesting deeper than any grid needs; and a key given twice, which YAML would drop unseen."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from commbench.config.errors import ConfigError
from commbench.config.parsers import shown
from commbench.store.safe_io import read_small_text

# A YAML document is a graph: an alias reuses a node, so 400 bytes of nested aliases stand for billions of
# values, which anything that walks the result (printing, hashing a run id) expands. Refused past this size.
MAX_YAML_VALUES = 100_000


MAX_YAML_DEPTH = 100  # nesting deeper than any grid or profile needs (a deeper document exhausts the parser)
MAX_USER_FILE_BYTES = 2 ** 20  # a grid, profile or cluster file is a page of text; a larger one is refused unread


_SIGNIFICANT = frozenset(" \t\r\n'\"#[]{},:?-|>&!")  # what can change the nesting or what follows
_PLAIN_RUN = re.compile(r"[^ \t\r\n'\"#\[\]{},:?\-|>&!]+")


def _depth(text: str) -> int:
    """A YAML document's flow nesting: the most brackets open at once (counted to just past
    :data:`MAX_YAML_DEPTH`). Brackets inside quoted scalars, comments, block scalars (``|``, ``>``) and plain text
    of the block context are text, not nesting, so a description may hold any number of them. One pass, linear in
    the text."""
    deepest = level = i = 0
    node_start = True  # where a node may begin: only there does a quote open a quoted scalar
    while i < len(text):
        ch = text[i]
        if ch not in _SIGNIFICANT:  # a run of plain text, skipped at once
            i, node_start = _PLAIN_RUN.match(text, i).end(), False
            continue
        if ch == "#" and (i == 0 or text[i - 1] in " \t\r\n"):
            i = _line_end(text, i)
            continue
        if node_start and ch in "'\"":
            i, node_start = _quoted_end(text, i), False
            continue
        if node_start and not level and ch in "|>" and _block_header(text, i):
            i = _block_scalar_end(text, i)
            continue
        if node_start and ch in "&!":  # an anchor or a tag: its node follows
            i = _token_end(text, i)
            continue
        if ch == "\n":
            node_start = True
        elif ch in "[{" and (node_start or level):
            level, node_start = level + 1, True
            deepest = max(deepest, level)
            if deepest > MAX_YAML_DEPTH:  # deep enough to refuse: the rest need not be read
                break
        elif ch in "]}" and level:
            level, node_start = level - 1, False
        elif ch == "," and level:
            node_start = True
        elif ch in ":-?" and _indicator(text, i, level):
            node_start = True
        elif ch not in " \t\r":
            node_start = False  # plain text (a '|' or '>' that heads no block scalar)
        i += 1
    return deepest


def _indicator(text: str, i: int, level: int) -> bool:
    """``:`` (a value), ``-`` (a block sequence entry) or ``?`` (a key) acting as YAML's indicator at ``i``: followed
    by a blank, or ``:`` anywhere inside brackets (as PyYAML reads a flow mapping)."""
    if text[i] == ":" and level:
        return True
    if text[i] in "-?" and level:
        return False  # inside brackets these are plain text
    return i + 1 == len(text) or text[i + 1] in " \t\r\n"


def _token_end(text: str, i: int) -> int:
    """The index after the anchor (``&name``: letters, digits, '-', '_', as PyYAML reads one) or tag (``!...``, up to
    a blank, as PyYAML reads one) that begins at ``i``."""
    anchor, i = text[i] == "&", i + 1
    while i < len(text) and text[i] not in " \t\r\n" and (not anchor or text[i].isalnum() or text[i] in "-_"):
        i += 1
    return i


def _line_end(text: str, i: int) -> int:
    end = text.find("\n", i)
    return len(text) if end < 0 else end


def _quoted_end(text: str, i: int) -> int:
    """The index after the quoted scalar opened at ``i`` ('' escapes a single quote, a backslash a double one)."""
    quote, i = text[i], i + 1
    while i < len(text):
        if text[i] == "\\" and quote == '"':
            i += 2
        elif text[i] == quote:
            if quote == "'" and text[i + 1:i + 2] == "'":
                i += 2
            else:
                return i + 1
        else:
            i += 1
    return len(text)


def _block_header(text: str, i: int) -> bool:
    """Whether ``|`` or ``>`` at ``i`` begins a block scalar: only indicators, then blanks, then the line's end or a
    comment. Looks no further than the first other character, so that the scan stays linear."""
    j = i + 1
    while j < len(text) and text[j] in "+-123456789":
        j += 1
    blank = j
    while j < len(text) and text[j] in " \t\r":
        j += 1
    return j == len(text) or text[j] == "\n" or (text[j] == "#" and j > blank)


def _block_scalar_end(text: str, i: int) -> int:
    """The index of the line break after a block scalar's last line: its lines are blank or indented at least as
    far as its first line, which is indented further than the line of its header."""
    line_start = text.rfind("\n", 0, i) + 1
    header_indent = len(text[line_start:i]) - len(text[line_start:i].lstrip(" "))
    end, indent = _line_end(text, i), None
    while end < len(text):
        next_end = _line_end(text, end + 1)
        line = text[end + 1:next_end]
        if line.strip():
            own = len(line) - len(line.lstrip(" "))
            indent = own if indent is None else indent
            if own < indent or own <= header_indent:
                break
        end = next_end
    return end


def read_user_text(path: Path) -> str:
    """A user's file (a grid, a profile, a cluster) as UTF-8 text, or ConfigError naming it: a regular file of at
    most :data:`MAX_USER_FILE_BYTES`, read without following it into a FIFO's wait or a device's endless bytes."""
    try:
        return read_small_text(Path(path), MAX_USER_FILE_BYTES, ConfigError)
    except ConfigError as exc:
        if str(exc).endswith("(not UTF-8)"):  # say what to do about it
            raise ConfigError(f"{path}: not UTF-8 text (save it as UTF-8)") from None
        raise


def _expanded_size(root: yaml.Node, what: str) -> int:
    """The values ``root`` stands for once its aliases are expanded (counted to just past :data:`MAX_YAML_VALUES`),
    each node counted once. A mapping that gives one key twice is refused here too: YAML would keep the last value
    silently, and a grid whose ``axes`` repeats a key would lose an axis unseen."""
    sizes: dict[int, int] = {}

    def size(n) -> int:
        if id(n) in sizes:
            return sizes[id(n)]
        sizes[id(n)] = MAX_YAML_VALUES + 1  # a node that contains itself expands without end
        if isinstance(n, yaml.SequenceNode):
            total = 1 + sum(size(c) for c in n.value)
        elif isinstance(n, yaml.MappingNode):
            _refuse_repeated_keys(n, what)
            total = 1 + sum(size(k) + size(v) for k, v in n.value)
        else:
            total = 1
        sizes[id(n)] = min(total, MAX_YAML_VALUES + 1)
        return sizes[id(n)]

    return size(root)


def _refuse_repeated_keys(mapping: yaml.MappingNode, what: str) -> None:
    seen: set[tuple[str, str]] = set()
    for key, _value in mapping.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
            continue  # '<<' merges may repeat; a collection as a key is no setting's name
        if (key.tag, key.value) in seen:
            line = key.start_mark.line + 1 if key.start_mark else "?"
            raise ConfigError(f"{what}: key {shown(key.value)} appears twice in one mapping (again on line {line}); "
                              f"YAML would keep only the last")
        seen.add((key.tag, key.value))


def load_yaml(text: str, what: str) -> Any:
    """``yaml.safe_load`` for text from users (grids, profiles, --set values), refusing documents whose aliases
    expand past :data:`MAX_YAML_VALUES` values, nested too deeply, or giving a key twice in one mapping. Raises
    ConfigError (naming ``what``) or yaml.YAMLError."""
    if _depth(text) > MAX_YAML_DEPTH:
        raise ConfigError(f"{what}: nested more than {MAX_YAML_DEPTH} levels deep; refused")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise ConfigError(f"{what}: nested too deeply; refused") from None
    if node is not None and _expanded_size(node, what) > MAX_YAML_VALUES:
        raise ConfigError(f"{what}: its YAML aliases expand to more than {MAX_YAML_VALUES:,} values; refused")
    try:
        return yaml.safe_load(text)
    except ValueError as exc:  # an integer of thousands of digits: Python refuses to convert it
        raise ConfigError(f"{what}: {str(exc).split(';')[0]}") from None


