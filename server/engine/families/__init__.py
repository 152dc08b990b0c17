"""Module families, by name. Adding a family = one class + one entry here."""

from __future__ import annotations

from contract.families import get_family_spec
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
    get_family_spec(name)  # the contract names the families: one "unknown family" error
    return FAMILIES[name]


__all__ = ["FAMILIES", "Family", "ModuleConfigError", "Params", "get_family"]
