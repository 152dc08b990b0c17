"""What is served right now: immutable values, replaced as a whole by the runtime."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from server.routing.classifier import Classifier


class ModuleRef(NamedTuple):
    """One module version: the domain (the module's name) and its version. Its `key`,
    `"<domain>@<version>"`, is the engine's name for it; `parse` is the one way back."""

    domain: str
    version: int

    @property
    def key(self) -> str:
        return f"{self.domain}@{self.version}"

    @classmethod
    def parse(cls, key: str) -> ModuleRef:
        domain, _, version = key.rpartition("@")
        if not domain or not version.isdigit():
            raise ValueError(f"not a module id: {key!r} (expected '<domain>@<version>')")
        return cls(domain, int(version))


def parse_module_id(value: str) -> ModuleRef:
    """The module version an engine key names (`ModuleRef.parse`)."""
    return ModuleRef.parse(value)


@dataclass(frozen=True)
class DomainEntry:
    """A served domain: the module version registered in the engine."""

    name: str
    version: int
    family: str
    size: int  # parameter count
    mixes_domains: bool = False  # a word-level mixture (contract.families capability)

    @property
    def ref(self) -> ModuleRef:
        return ModuleRef(self.name, self.version)

    @property
    def module_id(self) -> str:
        return self.ref.key


@dataclass(frozen=True)
class ServingState:
    """What is served right now; replaced as a whole, never mutated."""

    domains: Mapping[str, DomainEntry] = field(default_factory=dict)
    classifier: Classifier | None = None
    failures: Mapping[str, str] = field(default_factory=dict)  # "backbone" | "classifier"
    module_failures: Mapping[str, str] = field(default_factory=dict)  # domain -> problem
    desired: Mapping[str, int] = field(default_factory=dict)  # the registry's active versions
    # tenant -> its own router (server/routing/tenant_routers.py)
    tenant_classifiers: Mapping[str, Classifier] = field(default_factory=dict)
    # without a classifier: why (no router of its own, none to share; shared_router.py)
    router_note: str = ""

    def broken(self) -> dict[str, tuple[int, str]]:
        """Active domains that no loaded version serves: name -> (version, problem)."""
        return {name: (self.desired.get(name, 0), problem)
                for name, problem in self.module_failures.items() if name not in self.domains}

    def versions(self) -> dict[str, int]:
        return {name: entry.version for name, entry in self.domains.items()}

    def module_ids(self) -> set[str]:
        return {entry.module_id for entry in self.domains.values()}

    def mixtures(self) -> set[str]:
        """The served domains whose module is a word-level mixture."""
        return {name for name, entry in self.domains.items() if entry.mixes_domains}
