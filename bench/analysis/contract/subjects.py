"""Which compressors the report checks: the compressor of every registered kit method (the built-ins and a
user's), each with its method's default parameters or those given as ``method.KEY=VALUE``; a method with a
``clip`` parameter also gets its clip-off row (``clip=0``), which must be unbiased for the plain input.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from commbench.config import ConfigError, method_params_of
from commbench.methods import registry
from commbench.methods.kit import KitMethod

INPUT = "the input"


@dataclass(frozen=True)
class Subject:
    label: str
    method: type[KitMethod]
    params: object
    target: str | None  # what its output should average to: the declared phrase, or the clip-off row's input

    @property
    def claims(self) -> dict[str, str]:
        """What the method's paper states of its compressor (``claims``, by property), beside what is measured."""
        return dict(getattr(self.compressor, "claims", {}) or {})

    @property
    def compressor(self) -> type:
        """The compressor class these parameters pick (a variant may declare other properties)."""
        return self.method.compressor_for(self.params)


def kit_methods(name: str | None = None) -> dict[str, type[KitMethod]]:
    """The registered kit methods, or the one named (an unknown name: the registry's error)."""
    if name is None:
        return {n: c for n in registry.names() if _is_kit(c := registry.get(n))}
    cls = registry.get(name)
    if not _is_kit(cls):
        known = ", ".join(kit_methods()) or "none"
        raise ConfigError(f"method {name}: not a kit method (it has no compressor to check); the kit methods: {known}")
    return {name: cls}


def unchecked() -> dict[str, str]:
    """The registered methods that are not kit methods (no compressor to check: the fp32 all-reduce, PowerSGD's
    two rounds, SSD-SGD's parameter servers, a user's own ``step``), each with its summary."""
    kit = kit_methods()
    return {n: registry.get(n).summary for n in registry.names() if n not in kit}


def subjects(name: str | None = None, settings: Mapping[str, object] | None = None) -> list[Subject]:
    """One subject per kit method (the one named), and the clip-off row where the method has a clip."""
    if settings and name is None:
        raise ConfigError("--set: needs --method (the parameters are one method's)")
    out = []
    for method_name, cls in kit_methods(name).items():
        params = params_of(method_name, settings or {})
        out.append(Subject(method_name, cls, params, cls.compressor_for(params).unbiased))
        if getattr(params, "clip", 0):
            out.append(Subject(f"{method_name} clip=0", cls, dataclasses.replace(params, clip=0), INPUT))
        for label, values in getattr(cls, "contract_rows", {}).items() if not settings else ():
            variant = dataclasses.replace(params, **values)  # a variant the method names: a row of its own
            out.append(Subject(f"{method_name} {label}", cls, variant, cls.compressor_for(variant).unbiased))
    return out


def params_of(name: str, settings: Mapping[str, object]):
    """``name``'s Params: its defaults (no task's recipe), with the ``method.KEY`` settings checked and applied as
    a run's are."""
    stray = [k for k in settings if not k.startswith("method.")]
    if stray:
        raise ConfigError(f"--set {stray[0]}: compressors takes method.KEY=VALUE only")
    values, _ = method_params_of(_NoRecipe(), "", name, settings)
    return registry.params_for(name, values)


def _is_kit(cls) -> bool:
    return isinstance(cls, type) and issubclass(cls, KitMethod) and hasattr(cls, "compressor")


class _NoRecipe:
    """A task that changes no method parameter: the report checks the methods' own defaults."""

    def method_overlay(self, recipe: str, method: str) -> dict:
        return {}
