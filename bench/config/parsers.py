"""The parsers of setting values: each takes ``(key, value)`` and returns the value checked and normalised, or
raises ConfigError naming the key. Command-line numbers are read in ASCII only."""
from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Callable

from commbench.config.errors import ConfigError
from commbench.store.results_folder import ResultsFolder
from commbench.store.safe_io import UnsafePath, check_target


_ASCII_INT = re.compile(r"^[+-]?[0-9]+$")
_ASCII_FLOAT = re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$")


def ascii_int(text: str) -> int:
    """A command-line integer in ASCII digits (Python's int() also reads other scripts' digits: '２')."""
    if not _ASCII_INT.match(text.strip()):
        raise ValueError(text)
    return int(text)


def ascii_float(text: str) -> float:
    """A finite command-line number in ASCII (no other scripts' digits, no nan or inf)."""
    if not _ASCII_FLOAT.match(text.strip()):
        raise ValueError(text)
    value = float(text)
    if not math.isfinite(value):  # 1e999 matches the pattern but reads as inf
        raise ValueError(text)
    return value


ascii_int.__name__, ascii_float.__name__ = "integer", "number"  # argparse names the type in its message

SHOWN_CHARS = 80  # the most of a user's value an error message echoes: a pasted megabyte must stay one short line


def clipped(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` for an error message, cut to ``limit`` characters with an ellipsis."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` for an error message, cut to ``limit`` characters with an ellipsis."""
    return clipped(repr(value), limit)


def integer(minimum: int | None = None, maximum: int | None = None) -> Callable[[str, Any], int]:
    def parse(key, v):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)) \
                or int(v) != v:
            raise ConfigError(f"{key}: expected an integer, got {shown(v)}")
        if minimum is not None and v < minimum:
            raise ConfigError(f"{key}: must be >= {minimum}, got {shown(v)}")
        if maximum is not None and v > maximum:
            raise ConfigError(f"{key}: must be <= {maximum:,}, got {shown(v)}")
        return int(v)
    return parse


def number(minimum: float | None = None, maximum: float | None = None) -> Callable[[str, Any], float]:
    def parse(key, v):
        if isinstance(v, str):  # YAML 1.1 reads 1e-4 (no dot) as a string
            try:
                v = float(v)
            except ValueError:
                pass
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ConfigError(f"{key}: expected a number, got {shown(v)}")
        if (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
            raise ConfigError(f"{key}: must be in [{minimum}, {maximum}], got {shown(v)}")
        return float(v)
    return parse


def one_of(*options: str) -> Callable[[str, Any], str]:
    def parse(key, v):
        if not isinstance(v, str) or v not in options:
            raise ConfigError(f"{key}: {shown(v)} is not one of {', '.join(options)}")
        return v
    return parse


def identifier(key, v):
    if not isinstance(v, str) or not v:
        raise ConfigError(f"{key}: expected a name, got {shown(v)}")
    return v


SYSTEM_FOLDERS = (("proc",), ("sys",), ("dev",))  # pseudo file systems: no place for a user's files


def _nearest_existing(path: Path) -> Path:
    """``path`` itself or its nearest ancestor that exists (what a folder made at ``path`` would be made in)."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def data_folder(key, v):
    """A folder where data sets are read and provisioned: not a file, not below a file, not a pseudo file system."""
    if v is None:
        return None
    v = identifier(key, v)
    path = Path(v).resolve()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{key}: {v} is a file, not a folder")
    if path.parts[1:2] in SYSTEM_FOLDERS:
        raise ConfigError(f"{key}: {v} is a system folder, not one for data sets")
    if not (probe := _nearest_existing(path)).is_dir():  # provisioning would make its folders below a file
        raise ConfigError(f"{key}: {v}: {probe} is a file, not a folder")
    return v


def _writable_folder(option: str, value: str, folder: Path) -> None:
    """ConfigError naming ``value`` (the path as the user gave it) unless files can be made in ``folder`` (or in
    the folder it would be made in): not in a pseudo file system, not below a file, writable. Writes nothing."""
    resolved = Path(os.path.abspath(folder)).resolve()  # links followed: a link into /proc is /proc
    if resolved.parts[1:2] in SYSTEM_FOLDERS:
        raise ConfigError(f"{option} {value}: in a system folder (/{resolved.parts[1]}), where no output can be "
                          f"written")
    probe = _nearest_existing(resolved)
    if not probe.is_dir():
        raise ConfigError(f"{option} {value}: {probe} is a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {value}: cannot write in {probe} (no permission, or a read-only file system)")


def output_folder(option: str, value: str) -> Path:
    """A folder a command writes its output into (it may not exist yet), checked before any work. Nothing is
    written by the check; ConfigError names the path as the user gave it."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{option}: an empty path; name a folder")
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {value}: is a file, not a folder")
    _writable_folder(option, value, path)
    return path


def existing_results_folder(value: str, option: str = "--results") -> ResultsFolder:
    """The results folder a command reads (table, compare, plot, report, status, model tta), checked before any
    work: ConfigError, one line naming the path as the user gave it, unless it is a folder. Checked when the
    command starts, not as argparse's ``type``: argparse would word the message its own way, and a reading
    command's default folder depends on its other options (``--paper``)."""
    if not Path(value).is_dir():
        raise ConfigError(f"{option} {value}: no such folder")
    return ResultsFolder(Path(value))


def output_file(option: str, value: str) -> Path:
    """A file a command writes (a table, a figure), checked before any work: nothing but a regular file at its
    name, and a folder it can be written in. ConfigError names the path as the user gave it (never a temporary
    file's name)."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{option}: an empty path; name a file")
    path = Path(value)
    if path.is_dir():
        raise ConfigError(f"{option} {value}: a folder; {option} names the file to write")
    try:  # a link, FIFO or device at the name: replacing it would write elsewhere, hang or reach the device
        check_target(path)
    except UnsafePath as exc:
        raise ConfigError(f"{option} {exc}") from None
    except OSError:
        pass  # a parent that is not a folder: said next, of the path as given
    _writable_folder(option, value, path.parent)
    return path


def optional_name(key, v):
    return None if v is None else identifier(key, v)


def positive_ints(key, v):
    if not isinstance(v, (list, tuple)) or not all(isinstance(i, int) and not isinstance(i, bool) and i > 0
                                                   for i in v):
        raise ConfigError(f"{key}: expected a list of positive integers, got {shown(v)}")
    return [int(i) for i in v]


def optional_integer(minimum: int, maximum: int | None = None):
    inner = integer(minimum, maximum)
    return lambda key, v: None if v is None else inner(key, v)


def optional_number(minimum: float | None = None, maximum: float | None = None):
    inner = number(minimum, maximum)
    return lambda key, v: None if v is None else inner(key, v)


# Link rates of an emulated network (``net``): tc's own notation, bits per second.
NET_UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
_NET_RATE = re.compile(r"^(\d+(?:\.\d+)?)(kbit|mbit|gbit)$")


def net_rate_bits(rate: str) -> float:
    """``"100mbit"`` -> 1e8 (bits per second). Raises ConfigError for anything but ``<number><kbit|mbit|gbit>``."""
    m = _NET_RATE.match(rate.strip().lower()) if isinstance(rate, str) else None
    if m is None or float(m.group(1)) <= 0:
        raise ConfigError(f"net: {shown(rate)} is not a link rate (expected <number><kbit|mbit|gbit>, e.g. 1gbit)")
    return float(m.group(1)) * NET_UNITS[m.group(2)]


def link_rate(key, v):
    try:
        net_rate_bits(v)
    except ConfigError as e:
        raise ConfigError(f"{key}:{str(e).split(':', 1)[1]}") from None
    return v.strip().lower()  # one spelling per rate: the run id does not depend on case


def boolean(key, v):
    if not isinstance(v, bool):
        raise ConfigError(f"{key}: expected true or false, got {shown(v)}")
    return v


# Rates and sizes for the performance models (``commbench model``): any common spelling of a link rate, in bits
# or bytes per second (``net`` above takes tc's own notation only, since tc is what applies it).
_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMgGtT]?)(bit|bps|B|byte)(?:/s|ps)?\s*$",
                   re.IGNORECASE)
_SIZE = re.compile(r"^\s*([0-9]+)\s*(B|KiB|MiB|GiB|kB|KB|MB|GB)?\s*$")
_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_SIZE_UNIT = {None: 1, "B": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30, "kB": 10 ** 3, "KB": 10 ** 3,
              "MB": 10 ** 6, "GB": 10 ** 9}


def rate_bytes(text: str, what: str = "rate") -> float:
    """A link rate to bytes/s: ``1gbit``, ``100mbit``, ``10Gbps`` (bits/s, decimal prefixes) or ``15.75GB``,
    ``12GByte`` (bytes/s). A bare lower-case ``b`` is refused as ambiguous."""
    m = _RATE.match(str(text))
    if not m:
        raise ConfigError(f"{what}: cannot read rate {shown(text)} (examples: 1gbit, 100mbit, 10gbit, 15.75GB)")
    value, prefix, unit = float(m.group(1)), m.group(2).lower(), m.group(3)
    if unit.lower() in ("bit", "bps"):
        value = value * _PREFIX[prefix] / 8
    elif unit == "B" or unit.lower() == "byte":
        value = value * _PREFIX[prefix]
    else:
        raise ConfigError(f"{what}: {shown(text)} is ambiguous: write bit (bits/s) or B (bytes/s)")
    if not value > 0:
        raise ConfigError(f"{what}: must be positive, got {shown(text)}")
    return value


def size_bytes(text: str, what: str = "sizes", maximum: int | None = None) -> int:
    """A message size in bytes: ``4096``, ``64KiB``, ``1MiB``, ``1MB``; at most ``maximum`` bytes where given."""
    m = _SIZE.match(str(text))
    if not m:
        raise ConfigError(f"{what}: cannot read size {shown(text)} (examples: 4096, 64KiB, 1MiB)")
    size = int(m.group(1)) * _SIZE_UNIT[m.group(2)]
    if maximum is not None and size > maximum:
        raise ConfigError(f"{what}: {shown(text)} is more than {binary_size(maximum)}, the largest allowed")
    return size


def binary_size(n: int) -> str:
    """``268435456`` -> ``256 MiB``: a size limit as a person reads it."""
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale:,} {unit}"
    return f"{n:,} bytes"


MAX_LIST_VALUES = 10_000      # node counts or delay steps a model command tabulates: a row each
MAX_LIST_VALUE = 1_000_000    # a million nodes, or delay steps: past any cluster or schedule the models describe


def int_list(text: str, what: str, maximum: int = MAX_LIST_VALUE) -> list[int]:
    """``1,2,4,8`` or ``1..5`` (inclusive) to positive integers of at most ``maximum``, and at most
    :data:`MAX_LIST_VALUES` of them (a range is counted before it is made: ``1..1000000000`` is refused, not
    built)."""
    text = str(text).strip()
    try:
        if ".." in text:
            lo, hi = (ascii_int(x) for x in text.split("..", 1))
            count = hi - lo + 1
        else:
            items = [x for x in text.split(",") if x.strip()]
            count, lo, hi = len(items), None, None
    except ValueError:
        raise ConfigError(f"{what}: cannot read {shown(text)} (examples: 1,2,4,8 or 1..5)") from None
    if count > MAX_LIST_VALUES:
        raise ConfigError(f"{what}: {shown(text)} gives {count:,} values, more than the {MAX_LIST_VALUES:,} allowed")
    try:
        values = list(range(lo, hi + 1)) if lo is not None else [ascii_int(x) for x in items]
    except ValueError:
        raise ConfigError(f"{what}: cannot read {shown(text)} (examples: 1,2,4,8 or 1..5)") from None
    if not values or any(v < 1 for v in values):
        raise ConfigError(f"{what}: need positive integers, got {shown(text)}")
    if (largest := max(values)) > maximum:
        raise ConfigError(f"{what}: {shown(largest)} is more than {maximum:,}, the largest allowed")
    return values


def bounded(value: float | None, what: str, *, above: float | None = None, at_least: float | None = None,
            at_most: float | None = None) -> float | None:
    """A finite number above ``above`` (or at least ``at_least``) and at most ``at_most``, or None where none was
    given."""
    if value is None:
        return None
    if not math.isfinite(value) or (above is not None and not value > above) or \
            (at_least is not None and not value >= at_least) or (at_most is not None and not value <= at_most):
        low = f"> {_plain(above)}" if above is not None else f">= {_plain(at_least)}" if at_least is not None else ""
        high = f"<= {_plain(at_most)}" if at_most is not None else ""
        bound = " and ".join(b for b in (low, high) if b)
        raise ConfigError(f"{what}: must be a number {bound}, got {shown(value)}")
    return value


def _plain(bound: float) -> str:
    """A bound as a person writes it: ``1,000,000`` rather than ``1e+06``."""
    return f"{int(bound):,}" if float(bound).is_integer() and abs(bound) < 1e15 else f"{bound:g}"
