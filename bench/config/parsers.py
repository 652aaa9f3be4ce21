"""The parsers of setting values: each takes ``(key, value)`` and returns the value checked and normalised, or
raises ConfigError naming the key. Command-line numbers are read in ASCII only."""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Callable

from commbench.config.errors import ConfigError


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
    return float(text)


ascii_int.__name__, ascii_float.__name__ = "integer", "number"  # argparse names the type in its message


def integer(minimum: int | None = None, maximum: int | None = None) -> Callable[[str, Any], int]:
    def parse(key, v):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)) \
                or int(v) != v:
            raise ConfigError(f"{key}: expected an integer, got {v!r}")
        if minimum is not None and v < minimum:
            raise ConfigError(f"{key}: must be >= {minimum}, got {v!r}")
        if maximum is not None and v > maximum:
            raise ConfigError(f"{key}: must be <= {maximum:,}, got {v!r}")
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
            raise ConfigError(f"{key}: expected a number, got {v!r}")
        if (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
            raise ConfigError(f"{key}: must be in [{minimum}, {maximum}], got {v!r}")
        return float(v)
    return parse


def one_of(*options: str) -> Callable[[str, Any], str]:
    def parse(key, v):
        if v not in options:
            raise ConfigError(f"{key}: {v!r} is not one of {', '.join(options)}")
        return v
    return parse


def identifier(key, v):
    if not isinstance(v, str) or not v:
        raise ConfigError(f"{key}: expected a name, got {v!r}")
    return v


def data_folder(key, v):
    """A folder where data sets are read and provisioned: not a file, not a pseudo file system."""
    if v is None:
        return None
    v = identifier(key, v)
    path = Path(v).resolve()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{key}: {v} is a file, not a folder")
    if path.parts[1:2] in (("proc",), ("sys",), ("dev",)):
        raise ConfigError(f"{key}: {v} is a system folder, not one for data sets")
    return v


def optional_name(key, v):
    return None if v is None else identifier(key, v)


def positive_ints(key, v):
    if not isinstance(v, (list, tuple)) or not all(isinstance(i, int) and not isinstance(i, bool) and i > 0
                                                   for i in v):
        raise ConfigError(f"{key}: expected a list of positive integers, got {v!r}")
    return [int(i) for i in v]


def optional_integer(minimum: int):
    inner = integer(minimum)
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
        raise ConfigError(f"net: {rate!r} is not a link rate (expected <number><kbit|mbit|gbit>, e.g. 1gbit)")
    return float(m.group(1)) * NET_UNITS[m.group(2)]


def link_rate(key, v):
    try:
        net_rate_bits(v)
    except ConfigError as e:
        raise ConfigError(f"{key}:{str(e).split(':', 1)[1]}") from None
    return v.strip().lower()  # one spelling per rate: the run id does not depend on case


def boolean(key, v):
    if not isinstance(v, bool):
        raise ConfigError(f"{key}: expected true or false, got {v!r}")
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
        raise ConfigError(f"{what}: cannot read rate {text!r} (examples: 1gbit, 100mbit, 10gbit, 15.75GB)")
    value, prefix, unit = float(m.group(1)), m.group(2).lower(), m.group(3)
    if unit.lower() in ("bit", "bps"):
        value = value * _PREFIX[prefix] / 8
    elif unit == "B" or unit.lower() == "byte":
        value = value * _PREFIX[prefix]
    else:
        raise ConfigError(f"{what}: {text!r} is ambiguous: write bit (bits/s) or B (bytes/s)")
    if not value > 0:
        raise ConfigError(f"{what}: must be positive, got {text!r}")
    return value


def size_bytes(text: str, what: str = "sizes") -> int:
    """A message size in bytes: ``4096``, ``64KiB``, ``1MiB``, ``1MB``."""
    m = _SIZE.match(str(text))
    if not m:
        raise ConfigError(f"{what}: cannot read size {text!r} (examples: 4096, 64KiB, 1MiB)")
    return int(m.group(1)) * _SIZE_UNIT[m.group(2)]


def int_list(text: str, what: str) -> list[int]:
    """``1,2,4,8`` or ``1..5`` (inclusive) to positive integers."""
    text = str(text).strip()
    try:
        if ".." in text:
            lo, hi = (ascii_int(x) for x in text.split("..", 1))
            values = list(range(lo, hi + 1))
        else:
            values = [ascii_int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{what}: cannot read {text!r} (examples: 1,2,4,8 or 1..5)") from None
    if not values or any(v < 1 for v in values):
        raise ConfigError(f"{what}: need positive integers, got {text!r}")
    return values


def bounded(value: float | None, what: str, *, above: float | None = None, at_least: float | None = None) \
        -> float | None:
    """A finite number above ``above`` (or at least ``at_least``), or None where none was given."""
    if value is None:
        return None
    if not math.isfinite(value) or (above is not None and not value > above) or \
            (at_least is not None and not value >= at_least):
        bound = f"> {above:g}" if above is not None else f">= {at_least:g}"
        raise ConfigError(f"{what}: must be a number {bound}, got {value!r}")
    return value

