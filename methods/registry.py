"""The open registry of methods: every method, built in or a user's, is a :class:`~commbench.methods.base.Method`
subclass registered under its ``name``, and every lookup of a method name goes through here.

Three ways in, all by :func:`register`:

* the built-ins (:mod:`commbench.methods.catalog` says where each lives), registered first, in that order;
* the modules named in the environment variable ``COMMBENCH_METHODS`` (comma-separated importable module names),
  imported at load: each registers its methods by calling :func:`register` (as a decorator). Child processes
  (dist workers, parameter servers) inherit the variable;
* the entry points of the group ``commbench.methods`` of installed distributions: the entry point's name is the
  method's name, its object a Method subclass of that ``name``; loading it registers it.

The registry loads (imports the built-ins, the modules, the entry points) lazily, once per process, the first time
it is asked for a name or the list: ``import commbench.methods`` stays cheap and imports no torch. A name taken
twice is :class:`MethodNameTaken`, naming both sources; an unknown name is :class:`UnknownMethod`, with the known
names and the nearest one. Both are ``ValueError``; ``UnknownMethod`` is also a ``KeyError`` (``METHODS[name]``).

This module imports nothing of torch at import; the classes it loads do.
"""
from __future__ import annotations

import importlib
import os
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable, TypeVar, overload

from .catalog import ALLREDUCE_BASELINE, CATALOG, THRESHOLD  # noqa: F401 (the families, for callers)

if TYPE_CHECKING:
    from .base import Method

GROUP = "commbench.methods"  # the entry-point group a user's distribution registers its methods in
ENV = "COMMBENCH_METHODS"    # comma-separated modules imported at load (each registers its methods)
# a method's name is part of its runs' ids and their records' file names (the results store's safe-name rule)
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SHOWN_CHARS = 80  # the most of a user's value an error message echoes (as the configuration's messages)

M = TypeVar("M", bound=type)


class MethodRegistryError(ValueError):
    """A method that cannot be registered or loaded. ``str(err)`` is one line."""


class UnknownMethod(MethodRegistryError, KeyError):
    """A method name nothing registered: the one error of every lookup (``get``, ``METHODS[name]``)."""

    def __init__(self, name: Any, known: list[str]):
        import difflib

        self.name, self.known = name, known
        nearest = difflib.get_close_matches(name, known, n=1) if isinstance(name, str) else []
        shown = repr(name)
        shown = shown if len(shown) <= SHOWN_CHARS else shown[:SHOWN_CHARS - 1] + "…"
        self.message = (f"unknown method {shown} (known: {', '.join(sorted(known))}"
                        f"{f'; did you mean {nearest[0]}?' if nearest else ''})")
        super().__init__(self.message)

    def __str__(self) -> str:  # a KeyError would print its message quoted
        return self.message


class MethodNameTaken(MethodRegistryError):
    """Two different classes registered under one name."""


class MethodLoadError(MethodRegistryError):
    """A ``COMMBENCH_METHODS`` module or an entry point that does not load, or does not give a method."""


_lock = threading.RLock()
_classes: dict[str, type[Method]] = {}
_sources: dict[str, str] = {}    # name -> where its class came from (module:qualname, and how it came)
_state = "unloaded"              # -> "loading" (this thread is loading: a module it imports may look up) -> "loaded"


def origin(cls: type) -> str:
    """``module:qualname`` of a class."""
    return f"{cls.__module__}:{cls.__qualname__}"


@overload
def register(cls: M, *, source: str | None = None) -> M: ...
@overload
def register(cls: None = None, *, source: str | None = None) -> Callable[[M], M]: ...
def register(cls=None, *, source=None):
    """Register a Method subclass under its ``name``: ``@register`` (or ``@register()``) above the class, or
    ``register(cls)``. Returns the class. Registering the same class again does nothing (nor does a re-definition
    of it, same module and qualname: a reloaded module); another class of a taken name raises
    :class:`MethodNameTaken`, naming both sources. ``source``: how the class came, for messages."""
    if cls is None:
        return lambda c: register(c, source=source)
    from .base import Method

    where = (source or origin(cls)) if isinstance(cls, type) else repr(cls)
    if not (isinstance(cls, type) and issubclass(cls, Method)):
        raise MethodLoadError(f"{where}: not a subclass of commbench.methods.Method, cannot register it")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not NAME.match(name):
        raise MethodLoadError(f"{where}: its name {name!r} is no method name (letters, digits, '.', '_', '-', "
                              f"starting with a letter or digit, at most 64)")
    with _lock:
        held = _classes.get(name)
        if held is not None and held is not cls and origin(held) != origin(cls):
            inherited = "" if "name" in vars(cls) else f" ({origin(cls)} inherits its name: give it its own)"
            raise MethodNameTaken(f"method name {name!r} is taken twice: by {_sources[name]} and by {where}"
                                  f"{inherited}")
        if held is not cls:
            _classes[name], _sources[name] = cls, where
    return cls


def unregister(name: str) -> None:
    """Remove a registered name (for tests: a class registered for one test only)."""
    with _lock:
        _classes.pop(name, None)
        _sources.pop(name, None)


def load() -> None:
    """Register the built-ins, import the ``COMMBENCH_METHODS`` modules and load the entry points: once per
    process (every accessor calls it; a failed load is tried again, and fails again, at the next lookup)."""
    global _state
    if _state == "loaded":
        return
    with _lock:
        if _state != "unloaded":  # loaded meanwhile, or a module this very load imports is asking
            return
        _state = "loading"
        try:
            for entry in CATALOG.values():
                module, _, qualname = entry.source.partition(":")
                register(getattr(importlib.import_module(module), qualname), source=entry.source)
            for module in _env_modules():
                _import_user_module(module)
            _load_entry_points()
        except BaseException:
            _state = "unloaded"
            raise
        # the built-ins first, in the catalog's order, whatever registered before the load
        ordered = {n: _classes[n] for n in CATALOG if n in _classes}
        ordered.update(_classes)
        _classes.clear()
        _classes.update(ordered)
        _state = "loaded"


def _env_modules() -> list[str]:
    return [m.strip() for m in os.environ.get(ENV, "").split(",") if m.strip()]


def _import_user_module(module: str) -> None:
    try:
        importlib.import_module(module)
    except MethodRegistryError:
        raise  # a name taken twice, a bad class: already says which
    except Exception as exc:
        raise MethodLoadError(f"{ENV}: cannot import {module!r}: {type(exc).__name__}: "
                              f"{_first_line(exc)}") from exc


def _load_entry_points() -> None:
    from importlib.metadata import entry_points

    from .base import Method

    for ep in entry_points(group=GROUP):
        dist = getattr(ep, "dist", None)
        where = f"entry point {ep.name!r} = {ep.value} in group {GROUP}" + (
            f" of {dist.name} {dist.version}" if dist is not None else "")
        try:
            obj = ep.load()
        except Exception as exc:
            raise MethodLoadError(f"{where}: cannot load it: {type(exc).__name__}: {_first_line(exc)}") from exc
        if not (isinstance(obj, type) and issubclass(obj, Method)):
            raise MethodLoadError(f"{where}: {obj!r} is not a subclass of commbench.methods.Method")
        if getattr(obj, "name", None) != ep.name:
            raise MethodLoadError(f"{where}: its class {origin(obj)} is named {getattr(obj, 'name', None)!r}, "
                                  f"not {ep.name!r} (the entry point's name is the method's name)")
        register(obj, source=f"{origin(obj)} ({where})")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


# -- the accessors: each loads the registry first ------------------------------------------------------------
def get(name: Any) -> type[Method]:
    """The class registered as ``name``; :class:`UnknownMethod` (with the nearest name) if none is."""
    load()
    cls = _classes.get(name) if isinstance(name, str) else None
    if cls is None:
        raise UnknownMethod(name, list(_classes))
    return cls


def names() -> tuple[str, ...]:
    """Every registered name: the built-ins in the catalog's order, then the others in the order they came."""
    load()
    return tuple(_classes)


def is_registered(name: Any) -> bool:
    load()
    return isinstance(name, str) and name in _classes


def source_of(name: str) -> str:
    """Where the class of ``name`` came from: ``module:qualname`` (and the entry point that brought it)."""
    get(name)
    return _sources[name]


def family_of(name: str) -> str | None:
    """The family of ``name``'s class (its ``family`` class attribute), or None."""
    return getattr(get(name), "family", None)


def members(family: str) -> tuple[str, ...]:
    """The names of the methods of ``family`` (``"threshold"``, ``"all-reduce baseline"``), in :func:`names`'
    order."""
    return tuple(n for n in names() if getattr(_classes[n], "family", None) == family)


def params_for(name: str, method_params: Mapping[str, Any] | None = None):
    """``name``'s ``Params`` built from a configuration's ``method_params`` (:meth:`Method.params_from`); the
    Params' own checks raise ``TypeError``/``ValueError``."""
    return get(name).params_from(method_params or {})


class Members(Sequence):
    """A family's names as a live, read-only sequence: asked of the registry at each use, not when made (so a
    module-level constant neither loads the registry at import nor misses a user's method of the family)."""

    def __init__(self, family: str):
        self.family = family

    def __getitem__(self, i):
        return members(self.family)[i]

    def __len__(self) -> int:
        return len(members(self.family))

    def __iter__(self) -> Iterator[str]:
        return iter(members(self.family))

    def __contains__(self, name: object) -> bool:
        return name in members(self.family)

    def index(self, name: object, *args) -> int:
        return members(self.family).index(name, *args)

    def __add__(self, other) -> tuple:
        return members(self.family) + tuple(other)

    def __repr__(self) -> str:
        return f"Members({self.family!r})"


class _Methods(Mapping):
    """``METHODS``: a read-only view of the registry, name -> class (``METHODS[name]``, ``name in METHODS``,
    ``METHODS.values()``); the registry loads at its first use."""

    def __getitem__(self, name: Any) -> type[Method]:
        return get(name)

    def __contains__(self, name: object) -> bool:
        return is_registered(name)

    def __iter__(self) -> Iterator[str]:
        return iter(names())

    def __len__(self) -> int:
        return len(names())

    def __repr__(self) -> str:
        return f"METHODS({', '.join(names())})" if _state == "loaded" else "METHODS(<not loaded yet>)"


METHODS: Mapping[str, type[Method]] = _Methods()
