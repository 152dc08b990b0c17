"""Declare, fill, validate: the machinery shared by the importers.

An importer declares where every engine tensor comes from (`TensorSource`), fills the
engine's spec from an external state dict, and reports *every* problem at once: missing,
mis-shaped, unexpected and inconsistently tied tensors, and unsupported options (with the
supported values named).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch
from torch import Tensor

from contract.backbone import BackboneConfig, ConfigError
from server.engine.backbone import Backbone

T = TypeVar("T")

_LAYER_NAME = re.compile(r"(encoder|decoder)\.layers\.(\d+)\.(.+)\.(weight|bias)")


class ConversionError(ValueError):
    """An external checkpoint that cannot become a backbone; `problems` lists every reason."""

    def __init__(self, what: str, problems: Sequence[str]) -> None:
        self.what = what
        self.problems = list(problems)
        noun = "problem" if len(self.problems) == 1 else "problems"
        super().__init__(f"cannot convert {what}: {len(self.problems)} {noun}: "
                         + "; ".join(self.problems))


class Checker:
    """Collects problems instead of stopping at the first (CTranslate2's ConfigurationChecker)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.problems: list[str] = []

    def add(self, problem: str) -> None:
        self.problems.append(problem)

    def extend(self, problems: Iterable[str]) -> None:
        self.problems.extend(problems)

    def require(self, condition: bool, problem: str) -> None:
        if not condition:
            self.problems.append(problem)

    def option(self, options: Mapping[str, Any], name: str, default: Any, *,
               supported: Sequence[Any]) -> None:
        """`options[name]` (or its default) must be one of `supported`."""
        value = options.get(name, default)
        if value not in supported:
            self.add(f"{name}={value!r} is not supported (supported: "
                     + ", ".join(repr(v) for v in supported) + ")")

    def choice(self, name: str, value: Any, supported: Mapping[str, T], *, fallback: T) -> T:
        """`supported[value]`; an unsupported value is a problem and yields `fallback`, so
        that validation can go on and report the other problems too."""
        if isinstance(value, str) and value in supported:
            return supported[value]
        self.add(f"{name}={value!r} is not supported (supported: {', '.join(supported)})")
        return fallback

    def config(self, **values: Any) -> BackboneConfig | None:
        """A BackboneConfig, or None with its problems recorded."""
        try:
            return BackboneConfig(**values)
        except (ConfigError, TypeError) as error:
            self.add(str(error))
            return None

    def raise_if_any(self) -> None:
        if self.problems:
            raise ConversionError(self.what, self.problems)


def expected_shapes(config: BackboneConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the engine's backbone needs, with its shape (no memory allocated)."""
    with torch.device("meta"):
        model = Backbone(config)
    return {name: tuple(value.shape) for name, value in model.state_dict().items()}


@dataclass(frozen=True)
class TensorSource:
    """Where every engine tensor comes from in an external state dict.

    `top`: engine name -> source name, outside the layers. `layers[side]`: a format string
    for the source prefix of layer N (`"model.encoder.layers.{}"`). `modules[side]`: engine
    module -> source module inside a layer (weight and bias follow). `transforms`: engine
    name -> reshaping of the source tensor. `zero_if_missing`: engine names whose absence
    means zeros (bias-free layers). `tied`: source name -> the source name it must equal.
    `ignored`: source-name patterns the engine recomputes (position tables).
    """

    top: Mapping[str, str]
    layers: Mapping[str, str]
    modules: Mapping[str, Mapping[str, str]]
    transforms: Mapping[str, Callable[[Tensor], Tensor]] = field(default_factory=dict)
    zero_if_missing: Callable[[str], bool] = lambda _name: False
    tied: Mapping[str, str] = field(default_factory=dict)
    ignored: Sequence[str] = ()

    def source_name(self, name: str) -> str | None:
        """The source name of engine tensor `name` (None: the declaration lacks it)."""
        if name in self.top:
            return self.top[name]
        match = _LAYER_NAME.fullmatch(name)
        if match is None:
            return None
        side, index, module, param = match.groups()
        source_module = self.modules[side].get(module)
        if source_module is None:
            return None
        return f"{self.layers[side].format(index)}.{source_module}.{param}"


def fill(source: TensorSource, state: Mapping[str, Tensor],
         expected: Mapping[str, tuple[int, ...]]) -> tuple[dict[str, Tensor], list[str]]:
    """The engine's tensors taken from `state`, and every problem found on the way."""
    tensors: dict[str, Tensor] = {}
    problems: list[str] = []
    used: set[str] = set()
    for name, shape in expected.items():
        origin = source.source_name(name)
        if origin is None:
            problems.append(f"no source declared for engine tensor {name!r}")
            continue
        used.add(origin)
        if origin not in state:
            if source.zero_if_missing(name):
                tensors[name] = torch.zeros(shape)
            else:
                problems.append(f"missing tensor {origin!r}")
            continue
        value = state[origin]
        if name in source.transforms:
            value = source.transforms[name](value)
        if tuple(value.shape) != shape:
            problems.append(f"tensor {origin!r} has shape {list(value.shape)}, "
                            f"expected {list(shape)}")
            continue
        # A copy: tied sources must not share memory in the saved file.
        tensors[name] = value.detach().to(dtype=torch.float32, copy=True).contiguous()
    problems += _tie_problems(source.tied, state)
    problems += _unexpected(state, used | set(source.tied), source.ignored)
    return tensors, problems


def _tie_problems(tied: Mapping[str, str], state: Mapping[str, Tensor]) -> list[str]:
    """Tied copies saved next to their original must be equal to it (they are dropped)."""
    problems: list[str] = []
    for copy, original in tied.items():
        if copy not in state or original not in state:
            continue
        a, b = state[copy], state[original]
        if a.shape != b.shape or not torch.equal(a, b):
            problems.append(f"tensor {copy!r} should be tied to {original!r} but differs")
    return problems


def _unexpected(state: Mapping[str, Tensor], used: set[str], ignored: Sequence[str]) -> list[str]:
    return [f"unexpected tensor {name!r}" for name in state
            if name not in used and not any(re.fullmatch(p, name) for p in ignored)]


def ordered_vocab(piece_to_id: Mapping[str, Any], label: str, check: Checker) -> list[str]:
    """A piece -> id map as a list indexed by id; ids must be exactly 0..N-1."""
    by_id: dict[int, str] = {}
    for piece, index in piece_to_id.items():
        if not isinstance(index, int) or isinstance(index, bool):
            check.add(f"{label}: id of {piece!r} is not an integer ({index!r})")
        elif index in by_id:
            check.add(f"{label}: id {index} is used by {by_id[index]!r} and {piece!r}")
        else:
            by_id[index] = piece
    stray = sorted(set(by_id) - set(range(len(by_id))))
    if stray:
        check.add(f"{label}: ids must be exactly 0..{len(by_id) - 1} (out of range: {stray[:5]})")
    pieces = [by_id[i] for i in sorted(by_id)]
    bad = [p for p in pieces if "\n" in p or "\r" in p]
    check.require(not bad, f"{label}: pieces with line breaks cannot be stored: {bad[:3]}")
    return pieces
