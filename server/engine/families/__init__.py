"""Module families, by name. Adding a family = one class + one entry here."""

from __future__ import annotations

from server.engine.families.adapters import GatedAdapter, HighwayAdapter, ResidualAdapter
from server.engine.families.base import Family, ModuleConfigError, Params
from server.engine.families.factorized import ParallelAttention, ShallowFactorization
from server.engine.families.ldr import LexicalDomainEmbedding
from server.engine.families.mixing import WordMixing

FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (ResidualAdapter(), HighwayAdapter(), GatedAdapter(), LexicalDomainEmbedding(),
                   WordMixing(), ShallowFactorization(), ParallelAttention())
}


def get_family(name: str) -> Family:
    try:
        return FAMILIES[name]
    except KeyError:
        known = sorted(FAMILIES)
        raise ModuleConfigError(f"unknown module family {name!r}; known: {known}") from None


__all__ = ["FAMILIES", "Family", "ModuleConfigError", "Params", "get_family"]
