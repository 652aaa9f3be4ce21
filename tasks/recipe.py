"""Recipes: hyper-parameters that carry their source.

Every value a task supplies is a :class:`Cited` value: the number and where it comes from (a paper's table
or section, or an official script). A value that no source states is marked ``assumed: <reason>``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Cited:
    value: Any
    source: str

    def __post_init__(self):
        if not self.source:
            raise ValueError("a recipe value needs a source (or 'assumed: <reason>')")


def assumed(value: Any, reason: str) -> Cited:
    return Cited(value, f"assumed: {reason}")


Recipe = dict[str, Cited]  # dotted setting key -> value with its source
