"""What is served right now: immutable values, replaced as a whole by the runtime."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from server.routing.classifier import Classifier


def module_id(domain: str, version: int) -> str:
    """The engine's name of a module version: `"<domain>@<version>"`."""
    return f"{domain}@{version}"


def parse_module_id(value: str) -> tuple[str, int]:
    domain, _, version = value.rpartition("@")
    if not domain or not version.isdigit():
        raise ValueError(f"not a module id: {value!r} (expected '<domain>@<version>')")
    return domain, int(version)


@dataclass(frozen=True)
class DomainEntry:
    """A served domain: the module version registered in the engine."""

    name: str
    version: int
    family: str
    size: int  # parameter count
    mixes_domains: bool = False  # a word-level mixture (contract.families capability)

    @property
    def module_id(self) -> str:
        return module_id(self.name, self.version)


@dataclass(frozen=True)
class ServingState:
    """What is served right now; replaced as a whole, never mutated."""

    domains: Mapping[str, DomainEntry] = field(default_factory=dict)
    classifier: Classifier | None = None
    failures: Mapping[str, str] = field(default_factory=dict)  # "backbone" | "classifier"
    module_failures: Mapping[str, str] = field(default_factory=dict)  # domain -> problem
    desired: Mapping[str, int] = field(default_factory=dict)  # the registry's active versions

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
