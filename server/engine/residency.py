"""Two residency tiers for domain modules.

- host tier: registered modules' tensors in host memory, an LRU cache of at most
  `host_capacity` entries and `host_budget_bytes` bytes (refilled through the `loader` the
  server injects; the engine never reads paths). A module evicted here that still sits in a
  device slot keeps serving from the slot;
- device tier: preallocated slots in banks (one bank per family/shape, `slots_per_bank`
  slots each). Activating copies a module into a free slot, or into the least recently used
  slot that is neither pinned nor in use by running work.

Work takes a `Lease` on the modules it uses; a leased slot is never evicted or overwritten,
so a request always finishes on the exact weights it started with. `prefetch` copies
modules already in host memory into spare slots ahead of their batch (the scheduler reads a
cold module off the engine thread, then asks for it), evicting no leased slot.

Events for the observer (metrics): "hit" (a module already in a slot), "load" (copied into
a slot, with its seconds), "eviction" (a slot reused), "host_eviction".
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from contract.backbone import BackboneConfig
from server.engine.families import ModuleConfigError, Params, get_family
from server.engine.slots import ModuleBank, bank_key, build_bank

Loader = Callable[[str], tuple[dict[str, Any], Params]]
Observer = Callable[[str, str, float], None]  # (event, family, seconds)


class ResidencyError(RuntimeError):
    """A module cannot be made resident (unknown, or every slot is busy)."""


@dataclass
class HostEntry:
    config: dict[str, Any]
    params: Params

    @property
    def nbytes(self) -> int:
        return sum(tensor.numel() * tensor.element_size() for tensor in self.params.values())


@dataclass(frozen=True)
class SlotRef:
    bank: ModuleBank
    slot: int


@dataclass
class Lease:
    """Modules held by one unit of work; give it back with `ModuleManager.release`."""

    refs: dict[str, SlotRef] = field(default_factory=dict)
    released: bool = False


def check_params(config: dict[str, Any], params: Params, backbone: BackboneConfig) -> list[str]:
    """Every missing, unexpected or mis-shaped tensor of a module."""
    expected = get_family(str(config["family"])).shapes(backbone, config)
    problems = [f"missing tensor {name!r} {list(shape)}" for name, shape in expected.items()
                if name not in params]
    problems += [f"unexpected tensor {name!r}" for name in params if name not in expected]
    problems += [f"tensor {name!r} has shape {list(params[name].shape)}, expected {list(shape)}"
                 for name, shape in expected.items()
                 if name in params and tuple(params[name].shape) != shape]
    return problems


class ModuleManager:
    def __init__(self, backbone: BackboneConfig, *, slots_per_bank: int, host_capacity: int,
                 device: torch.device, dtype: torch.dtype, loader: Loader | None = None,
                 observer: Observer | None = None, pack: bool = False,
                 int8: bool = False, grouped_dtype: torch.dtype | None = None,
                 host_budget_bytes: int | None = None) -> None:
        self.backbone = backbone
        self.pack = pack  # banks keep packed copies of their matrices (CPU float32)
        self.int8 = int8  # ... or int8 copies (CPU), which take precedence
        self.grouped_dtype = grouped_dtype  # grouped copies (families with a grouped form)
        self.slots_per_bank = slots_per_bank
        self.host_capacity = host_capacity
        self.host_budget_bytes = host_budget_bytes  # None: bounded by the count only
        self.host_bytes = 0  # the host tier's tensors, kept in step with `host`
        self.device, self.dtype = device, dtype
        self.loader, self.observer = loader, observer
        self.host: OrderedDict[str, HostEntry] = OrderedDict()
        self.banks: dict[str, ModuleBank] = {}
        self.slot_of: OrderedDict[str, SlotRef] = OrderedDict()  # device tier, LRU order
        self.in_use: dict[str, int] = {}
        self.pinned: set[str] = set()
        # prefetched and not used since: their sentences wait for the next batch, so
        # another slot is reused before theirs
        self.staged: set[str] = set()
        self._lock = threading.RLock()

    # host tier -----------------------------------------------------------------------
    def register(self, module_id: str, config: dict[str, Any], params: Params) -> None:
        """Validate and keep a module in host memory (replacing an entry of the same id)."""
        family = get_family(str(config.get("family")))
        config = family.normalise(config)
        problems = check_params(config, params, self.backbone)
        if problems:
            raise ModuleConfigError(f"module {module_id!r} does not fit the backbone: "
                                    + "; ".join(problems))
        host_params = {k: v.detach().to("cpu", torch.float32) for k, v in params.items()}
        with self._lock:
            replaced = self.host.pop(module_id, None)
            if replaced is not None:
                self.host_bytes -= replaced.nbytes
            entry = HostEntry(config, host_params)
            self.host[module_id] = entry
            self.host_bytes += entry.nbytes
            self._trim_host()

    def _over_budget(self) -> bool:
        budget = self.host_budget_bytes
        return len(self.host) > self.host_capacity or (budget is not None
                                                       and self.host_bytes > budget)

    def _trim_host(self) -> None:
        # the newest entry stays even alone over the budget: its caller is about to use it
        while len(self.host) > 1 and self._over_budget():
            victim, entry = next(iter(self.host.items()))
            self.host.pop(victim)
            self.host_bytes -= entry.nbytes
            self._emit("host_eviction", victim, family=str(entry.config["family"]))

    def resident(self, module_id: str) -> bool:
        """In host memory or in a device slot, so using it reads no file. Lock-free: the
        event loop asks, and one dict lookup is atomic under the GIL."""
        return module_id in self.slot_of or module_id in self.host

    def _host_entry(self, module_id: str) -> HostEntry:
        entry = self.host.get(module_id)
        if entry is None:
            if self.loader is None:
                raise ResidencyError(f"module {module_id!r} is not registered")
            config, params = self.loader(module_id)
            self.register(module_id, config, params)
            entry = self.host[module_id]
        self.host.move_to_end(module_id)
        return entry

    # device tier ---------------------------------------------------------------------
    def activate(self, module_id: str) -> SlotRef:
        """Make a module resident in a device slot (copying it in when needed)."""
        with self._lock:
            ref = self.slot_of.get(module_id)
            if ref is not None:
                self.slot_of.move_to_end(module_id)
                self.staged.discard(module_id)
                self._emit("hit", module_id, family=ref.bank.family.name)
                return ref
            started = time.perf_counter()
            entry = self._host_entry(module_id)
            bank = self._bank(entry.config)
            slot = self._spare_slot(bank, staged_too=True)
            if slot is None:
                raise ResidencyError(f"all {bank.n_slots} slots of the {bank.family.name!r} "
                                     "bank are pinned or in use")
            return self._write(module_id, entry, bank, slot, started)

    def _write(self, module_id: str, entry: HostEntry, bank: ModuleBank, slot: int,
               started: float) -> SlotRef:
        with torch.inference_mode():  # see _bank
            bank.write(slot, entry.params)
        ref = SlotRef(bank, slot)
        self.slot_of[module_id] = ref
        self._emit("load", module_id, time.perf_counter() - started, family=bank.family.name)
        return ref

    def prefetch(self, module_ids: Iterable[str]) -> list[str]:
        """Copy modules that wait in host memory into spare slots before their batch asks
        for them (the engine thread calls it between batches). Never reads a file, never
        evicts a leased or pinned slot nor another of `module_ids`; returns those copied."""
        wanted = list(dict.fromkeys(module_ids))
        copied: list[str] = []
        with self._lock:
            for module_id in wanted:
                entry = self.host.get(module_id)
                if module_id in self.slot_of or entry is None:
                    continue
                started = time.perf_counter()
                bank = self._bank(entry.config)
                slot = self._spare_slot(bank, keep=set(wanted))
                if slot is not None:
                    self._write(module_id, entry, bank, slot, started)
                    self.staged.add(module_id)
                    copied.append(module_id)
        return copied

    def _bank(self, config: dict[str, Any]) -> ModuleBank:
        key = bank_key(config)
        if key not in self.banks:
            # made and written in inference mode wherever it is called from (a batch, a
            # preload, a prefetch): a bank made inside a batch holds inference tensors,
            # which nothing outside inference mode may write
            with torch.inference_mode():
                self.banks[key] = build_bank(
                    config, self.backbone, n_slots=self.slots_per_bank, device=self.device,
                    dtype=self.dtype, pack=self.pack, int8=self.int8,
                    grouped_dtype=self.grouped_dtype)
        return self.banks[key]

    def _spare_slot(self, bank: ModuleBank, keep: set[str] | None = None, *,
                    staged_too: bool = False) -> int | None:
        """A free slot of `bank`, else the least recently used one that nothing leases,
        pins or `keep`s (its module evicted), a staged one only with `staged_too` and
        when no other is left; None when there is none."""
        used = {ref.slot for ref in self.slot_of.values() if ref.bank is bank}
        for slot in range(bank.n_slots):
            if slot not in used:
                return slot
        spare = [module_id for module_id, ref in self.slot_of.items()  # LRU first
                 if ref.bank is bank and module_id not in self.pinned
                 and not self.in_use.get(module_id) and module_id not in (keep or ())
                 and (staged_too or module_id not in self.staged)]
        if not spare:
            return None
        victim = next((m for m in spare if m not in self.staged), spare[0])
        ref = self.slot_of.pop(victim)
        self.staged.discard(victim)
        self._emit("eviction", victim, family=bank.family.name)
        return ref.slot

    def pin(self, module_id: str) -> None:
        with self._lock:
            self.activate(module_id)
            self.pinned.add(module_id)

    def unpin(self, module_id: str) -> None:
        with self._lock:
            self.pinned.discard(module_id)

    # leases --------------------------------------------------------------------------
    def acquire(self, module_ids: Iterable[str]) -> Lease:
        """Activate and hold every module (all or none)."""
        lease = Lease()
        with self._lock:
            try:
                for module_id in dict.fromkeys(module_ids):
                    lease.refs[module_id] = self.activate(module_id)
                    self.in_use[module_id] = self.in_use.get(module_id, 0) + 1
            except Exception:
                self.release(lease)
                raise
        return lease

    def release(self, lease: Lease) -> None:
        with self._lock:
            if lease.released:
                return
            lease.released = True
            for module_id in lease.refs:
                count = self.in_use.get(module_id, 0) - 1
                if count > 0:
                    self.in_use[module_id] = count
                else:
                    self.in_use.pop(module_id, None)

    def remove(self, module_id: str) -> None:
        """Forget a module in both tiers; refuses while running work holds it."""
        with self._lock:
            if self.in_use.get(module_id):
                raise ResidencyError(f"module {module_id!r} is in use by running work")
            entry = self.host.pop(module_id, None)
            if entry is not None:
                self.host_bytes -= entry.nbytes
            self.slot_of.pop(module_id, None)
            self.pinned.discard(module_id)
            self.staged.discard(module_id)

    def busy(self, module_id: str) -> int:
        with self._lock:
            return self.in_use.get(module_id, 0)

    def snapshot(self) -> dict[str, Any]:
        """The residency tables (tests assert them; metrics read them)."""
        with self._lock:
            return {"host": list(self.host),
                    "device": {m: (ref.bank.family.name, ref.slot)
                               for m, ref in self.slot_of.items()},
                    "pinned": sorted(self.pinned), "in_use": dict(self.in_use),
                    "host_bytes": self.host_bytes}

    def _emit(self, event: str, module_id: str, seconds: float = 0.0, *,
              family: str = "") -> None:
        if self.observer is not None:
            self.observer(event, family, seconds)
