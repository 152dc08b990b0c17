"""Module family configurations: each family's options, their defaults and validation, and
what the family can do (capabilities), without torch.

A module artifact's manifest `config` is `{"family": <name>, **options}`. The engine's
families (server/engine/families/) add the tensors and the computation to these specs; the
admin API and the training sidecar validate job configs against them alone.
Adding a family = one spec here + one engine class + one entry in each registry.
"""

from __future__ import annotations

from typing import Any

# Word-level mixing: the projections a module may mix, and on which sides.
MIXING_PROJECTIONS: tuple[str, ...] = ("q", "k", "v", "o", "fc1", "fc2")
MIXING_SIDES: tuple[str, ...] = ("encoder", "both")
MIXING_MAX_RANK = 1024


class ModuleConfigError(ValueError):
    """A module configuration that the family cannot build; lists every problem."""


class FamilySpec:
    """A family's configuration and capabilities. Subclasses are stateless."""

    name: str = ""
    # Trained jointly over several domains, never added as one new domain.
    joint: bool = False
    # One module holds several domains and weighs them per token (a word-level mixture):
    # it translates requests without a domain and can report per-token proportions.
    mixes_domains: bool = False

    def defaults(self) -> dict[str, Any]:
        """The family's options with their default values."""
        return {}

    def problems(self, config: dict[str, Any]) -> list[str]:
        """Every bad value of a config with defaults filled in."""
        return []

    def normalise(self, config: dict[str, Any]) -> dict[str, Any]:
        """Defaults filled in, unknown keys and bad values refused (all problems at once)."""
        allowed = self.defaults()
        merged = {**allowed, **{k: v for k, v in config.items() if k != "family"}}
        problems = [f"unknown option {k!r} for family {self.name!r}; allowed: {sorted(allowed)}"
                    for k in merged if k not in allowed]
        problems += self.problems(merged)
        if problems:
            raise ModuleConfigError("; ".join(problems))
        return {"family": self.name, **merged}


def _int_in(config: dict[str, Any], key: str, low: int, high: int) -> list[str]:
    value = config.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        return [f"{key} must be an integer in [{low}, {high}] (got {value!r})"]
    return []


class AdapterSpec(FamilySpec):
    """Residual adapters after every layer (Bapna & Firat 2019)."""

    name = "adapter"

    def defaults(self) -> dict[str, Any]:
        return {"bottleneck": 64}

    def problems(self, config: dict[str, Any]) -> list[str]:
        return _int_in(config, "bottleneck", 1, 8192)


class HighwaySpec(AdapterSpec):
    name = "highway"


class GatedSpec(HighwaySpec):
    name = "gated"


class LdrSpec(FamilySpec):
    """Lexicalised domain representations: low-rank embedding offsets."""

    name = "ldr"

    def defaults(self) -> dict[str, Any]:
        return {"rank": 8}

    def problems(self, config: dict[str, Any]) -> list[str]:
        return _int_in(config, "rank", 1, 256)


class FactorizedSpec(FamilySpec):
    """Per-domain copies of some projections (+ an optional FFN output matrix)."""

    ffn_matrix_default = False

    def defaults(self) -> dict[str, Any]:
        return {"ffn_matrix": self.ffn_matrix_default}

    def problems(self, config: dict[str, Any]) -> list[str]:
        value = config.get("ffn_matrix")
        if not isinstance(value, bool):
            return [f"ffn_matrix must be true or false (got {value!r})"]
        return []


class ShallowFactorizationSpec(FactorizedSpec):
    name = "sf"
    ffn_matrix_default = True


class ParallelAttentionSpec(FactorizedSpec):
    name = "pa"


class MixingSpec(FamilySpec):
    """Word-level domain mixing (Jiang et al. 2020): one module holds every domain."""

    name = "mixing"
    joint = True
    mixes_domains = True

    def defaults(self) -> dict[str, Any]:
        # rank None: k full copies of each projection (the paper); an integer r: each
        # domain's projection is the backbone's plus a rank-r difference (cheaper to run).
        return {"domains": None, "epsilon": 0.1, "sides": "encoder",
                "projections": list(MIXING_PROJECTIONS), "rank": None}

    def problems(self, config: dict[str, Any]) -> list[str]:
        found: list[str] = []
        domains = config.get("domains")
        if (not isinstance(domains, list) or len(domains) < 2
                or not all(isinstance(d, str) and d for d in domains)
                or len(set(domains)) != len(domains)):
            found.append(f"domains must be a list of at least 2 distinct domain names, in "
                         f"proportion order (got {domains!r})")
        epsilon = config.get("epsilon")
        if (not isinstance(epsilon, int | float) or isinstance(epsilon, bool)
                or not 0.0 <= epsilon < 1.0):
            found.append(f"epsilon must be a number in [0, 1) (got {epsilon!r})")
        if config.get("sides") not in MIXING_SIDES:
            found.append(f"sides must be one of {list(MIXING_SIDES)} "
                         f"(got {config.get('sides')!r})")
        projections = config.get("projections")
        if (not isinstance(projections, list) or not projections
                or any(p not in MIXING_PROJECTIONS for p in projections)
                or len(set(projections)) != len(projections)):
            found.append(f"projections must be a non-empty list of distinct names of "
                         f"{list(MIXING_PROJECTIONS)} (got {projections!r})")
        if config.get("rank") is not None:
            found += [f"{problem} or null (full copies)"
                      for problem in _int_in(config, "rank", 1, MIXING_MAX_RANK)]
        return found


FAMILY_SPECS: dict[str, FamilySpec] = {
    spec.name: spec
    for spec in (AdapterSpec(), HighwaySpec(), GatedSpec(), LdrSpec(), MixingSpec(),
                 ShallowFactorizationSpec(), ParallelAttentionSpec())
}


def get_family_spec(name: str) -> FamilySpec:
    try:
        return FAMILY_SPECS[name]
    except KeyError:
        known = sorted(FAMILY_SPECS)
        raise ModuleConfigError(f"unknown module family {name!r}; known: {known}") from None


def mixes_domains(family: str) -> bool:
    """Whether modules of `family` are word-level mixtures (False for unknown names)."""
    spec = FAMILY_SPECS.get(family)
    return spec is not None and spec.mixes_domains


def mixture_families() -> list[str]:
    """The names of the families whose modules are word-level mixtures."""
    return sorted(name for name, spec in FAMILY_SPECS.items() if spec.mixes_domains)
