"""The engine: one frozen backbone, module residency, and batched translation in which
every sentence may use a different module or a weighted mixture of modules.

Engine calls are idempotent and dumb: policy (which module, which weights, batch shapes)
belongs to the router and the scheduler.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from contract.backbone import BackboneConfig
from server.decoding.knn import Neighbours
from server.decoding.search import Hypothesis, SearchOptions, Stepper, search
from server.decoding.step_hooks import SentenceGuide, StepHook, batch_hook
from server.engine import int8_groups
from server.engine.backbone import Backbone
from server.engine.families import Params
from server.engine.families.mixing import WordMixing
from server.engine.fixed_steps import FixedStepper
from server.engine.host_paths import apply_quantized_engine
from server.engine.knn_store import build_guides, lead_key
from server.engine.layers import Attention
from server.engine.mixture import MixtureHooks, SourceProportions, encoder_layer_means
from server.engine.packing import PackedLinear, pack_linears, packing_available
from server.engine.residency import Lease, Loader, ModuleManager, Observer
from server.engine.stepper import MemberRow, MemberStepper
from server.engine.tokenizer import Tokenizer

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class EngineOptions:
    device: str = "cpu"
    dtype: str = "float32"  # float16 / bfloat16 on CUDA; bfloat16 on CPU (host_paths.py)
    int8: bool = False  # dynamic int8 quantization of linear layers (CPU)
    # CPU: torch's quantized engine for every int8 matmul (x86, onednn, ...; host_paths.py
    # picks it per host); None: torch's current one.
    quantized_engine: str | None = None
    packed: bool = True  # CPU float32: linear weights prepacked for oneDNN (see packing.py)
    # CPU: adapters' matrices run from int8 copies (per-column scales). Residual adapters
    # whose matrices have 64-column blocks run grouped through int8_groups.py (float32
    # rows; 8 mixed modules at ~1.0x one module, greedy and beam 4; -0.06 BLEU at worst on
    # the default's domains); other families and shapes, or a machine where the kernel
    # does not build, one fbgemm matmul per module (activations quantized per call, -0.16
    # BLEU at worst). Off by default until the serving runs settle (served ~10% faster at
    # saturation with it, README "Batches mixing adapters"). results/adapter_precision.md
    # measures the quality, engine_speed.md the speed, mixed_domains.md the built-in
    # default's mixed batches.
    module_int8: bool = False
    # CPU: a batch's residual adapters run together, one batched matmul per matrix over
    # bfloat16 copies (8 mixed modules at 0.98x one module at beam 4, 0.88x greedy;
    # results/engine_speed.md, results/adapter_precision.md). Takes precedence over int8.
    module_bf16: bool = False
    # A batch's residual adapters run grouped in the engine's dtype (one batched matmul
    # per matrix and layer instead of one matmul per module); None: on CUDA only, where a
    # batch mixing 8 modules otherwise launches 8x the adapter kernels at every step.
    # module_bf16 groups in bfloat16 either way.
    module_grouped: bool | None = None
    slots_per_bank: int = 16
    host_capacity: int = 64
    host_budget_bytes: int | None = None  # the host tier's bytes (None: the count only)
    # Decoding steps over fixed-shape buffers, each step one CUDA graph replay
    # (server/engine/fixed_steps.py); None: on CUDA only. True on CPU runs the same
    # buffers eagerly (tests).
    fixed_steps: bool | None = None


@dataclass(frozen=True)
class Member:
    """One ensemble member: a module id (None = plain backbone) and its weight."""

    module_id: str | None
    weight: float = 1.0


@dataclass(frozen=True)
class SentenceJob:
    source_ids: list[int]  # ends with EOS
    members: tuple[Member, ...]
    max_length: int  # target tokens, EOS included
    # Decoding guidance (server/decoding/step_hooks.py): ready-made guides (banned target
    # sequences), and memory pairs the engine forces into a kNN datastore.
    guides: tuple[SentenceGuide, ...] = field(default=(), compare=False)
    neighbours: Neighbours | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.source_ids:
            raise ValueError("a sentence job needs at least one source token")
        if not self.members:
            raise ValueError("a sentence job needs at least one member")
        bad = [m.weight for m in self.members if not (m.weight > 0 and math.isfinite(m.weight))]
        if bad:
            raise ValueError(f"member weights must be positive and finite (got {bad})")
        if self.max_length < 1:
            raise ValueError(f"max_length must be >= 1 (got {self.max_length})")


def load_backbone(config: BackboneConfig, tensors: dict[str, Tensor]) -> Backbone:
    """A backbone with exactly these tensors; lists every missing/unexpected/mis-shaped one."""
    model = Backbone(config)
    expected = model.state_dict()
    problems = [f"missing tensor {k!r}" for k in expected if k not in tensors]
    problems += [f"unexpected tensor {k!r}" for k in tensors if k not in expected]
    problems += [f"tensor {k!r} has shape {list(tensors[k].shape)}, expected {list(v.shape)}"
                 for k, v in expected.items() if k in tensors and tensors[k].shape != v.shape]
    if problems:
        raise ValueError(f"{len(problems)} problems loading the backbone: " + "; ".join(problems))
    model.load_state_dict({k: tensors[k].float() for k in expected})
    return model.eval().requires_grad_(False)


class Engine:
    def __init__(self, config: BackboneConfig, tensors: dict[str, Tensor], *,
                 source_tokenizer: Tokenizer, target_tokenizer: Tokenizer,
                 options: EngineOptions | None = None, loader: Loader | None = None,
                 observer: Observer | None = None) -> None:
        options = options or EngineOptions()
        self.config = config
        self.options = options
        self.device = torch.device(options.device)
        self.dtype = DTYPES[options.dtype]
        self.fixed_steps = self._on_cuda_unless_set(options.fixed_steps)
        self.source_tokenizer, self.target_tokenizer = source_tokenizer, target_tokenizer
        if options.quantized_engine and self.device.type == "cpu":
            apply_quantized_engine(options.quantized_engine)  # before any int8 prepacking
        model = load_backbone(config, tensors)
        self.project: nn.Module = _projection(model)
        pack = (options.packed and self.device.type == "cpu" and self.dtype == torch.float32
                and packing_available())
        if options.int8:
            model, self.project = _quantize(model, self.project)
        elif pack:
            pack_linears(model)
            self.project = PackedLinear.wrap(_as_linear(self.project))
        self.model = model.to(self.device, self.dtype)
        self.project = self.project.to(self.device, self.dtype)
        _fuse_self_attention(self.model, tensors, int8=options.int8, pack=pack,
                             device=self.device, dtype=self.dtype)
        if options.module_int8 and self.device.type == "cpu":
            int8_groups.available()  # built now (~1 s, once per machine), not at a request
        self.modules = ModuleManager(config, slots_per_bank=options.slots_per_bank,
                                     host_capacity=options.host_capacity, device=self.device,
                                     dtype=self.dtype, loader=loader, observer=observer,
                                     pack=pack, int8=options.module_int8,
                                     grouped_dtype=self._grouped_dtype(),
                                     host_budget_bytes=options.host_budget_bytes)

    def _grouped_dtype(self) -> torch.dtype | None:
        """The dtype a batch's residual adapters run grouped in (None: one call each)."""
        if self.options.module_bf16:
            return torch.bfloat16
        return self.dtype if self._on_cuda_unless_set(self.options.module_grouped) else None

    def _on_cuda_unless_set(self, chosen: bool | None) -> bool:
        """An option whose default (None) is: on CUDA only."""
        return chosen if chosen is not None else self.device.type == "cuda"

    def register_module(self, module_id: str, config: dict[str, Any], params: Params) -> None:
        self.modules.register(module_id, config, params)

    def max_length(self, source_len: int, *, ratio: float = 1.5, extra: int = 10,
                   limit: int = 512) -> int:
        """Default target budget: proportional to the source, within the position table."""
        return max(1, min(limit, self.config.max_positions, int(ratio * source_len) + extra))

    @torch.inference_mode()
    def translate(self, jobs: Sequence[SentenceJob],
                  options: SearchOptions) -> list[list[Hypothesis]]:
        """n-best hypotheses per job, in input order."""
        if not jobs:
            return []
        check_lengths(jobs, self.config)
        module_ids = [m.module_id for job in jobs for m in job.members if m.module_id]
        lease = self.modules.acquire(module_ids)
        try:
            return self._translate(jobs, options, lease)
        finally:
            self.modules.release(lease)

    def _translate(self, jobs: Sequence[SentenceJob], options: SearchOptions,
                   lease: Lease) -> list[list[Hypothesis]]:
        ranks = _key_ranks(lease)
        order = sorted(range(len(jobs)), key=lambda i: min(
            ranks[m.module_id] for m in jobs[i].members))
        rows: list[MemberRow] = []
        for sentence, job_index in enumerate(order):
            job = jobs[job_index]
            total = sum(m.weight for m in job.members)
            for number, member in enumerate(job.members):
                ref = lease.refs.get(member.module_id) if member.module_id else None
                key = (ref.bank, ref.slot) if ref else (None, -1)
                rows.append(MemberRow(ranks[member.module_id], key, sentence, number,
                                      math.log(member.weight / total)))
        rows.sort(key=lambda r: (r.rank, r.sentence, r.member))
        source = pad_rows([jobs[order[r.sentence]].source_ids for r in rows], self.config.pad_id)
        stepper = MemberStepper(self.model, self.project, None, rows, device=self.device)
        hooks = stepper.hooks if stepper.hooks.runs else None
        memory, mask = self.model.encode(source.to(self.device), hooks)
        stepper.state = self.model.start_state(memory, mask, hooks)
        max_lengths = [jobs[i].max_length for i in order]
        hook = step_hook(self, lease, [jobs[i] for i in order])
        chosen: Stepper = stepper
        if self.fixed_steps and stepper.single:  # one member per sentence, in order
            chosen = FixedStepper(self.model, self.project, stepper.state,
                                  keys=[row.key for row in rows], beam=options.beam_size,
                                  capacity=max(max_lengths),
                                  capture=self.device.type == "cuda")
        chosen_options = with_ids(options, self.config)
        results = (search(chosen, max_lengths, chosen_options) if hook is None  # as ever
                   else search(chosen, max_lengths, chosen_options, hook))
        ordered: list[list[Hypothesis]] = [[] for _ in jobs]
        for sentence, job_index in enumerate(order):
            ordered[job_index] = results[sentence]
        return ordered

    @torch.inference_mode()
    def proportions(self, module_id: str, sources: Sequence[list[int]]) -> SourceProportions:
        """Debug: a word-level mixture's domain proportions of every source token, per
        encoder layer (the mean over the layer's mixed sites), from a separate encoder
        pass; translation batches never record them."""
        lease = self.modules.acquire([module_id])
        try:
            ref = lease.refs[module_id]
            family = ref.bank.family
            if not isinstance(family, WordMixing):
                raise ValueError(f"module {module_id!r} is of family {family.name!r}, not a "
                                 "word-level mixture")
            domains = [str(d) for d in ref.bank.config["domains"]]
            if not sources:
                return SourceProportions(domains, [])
            hooks = MixtureHooks(family, ref.bank.view(ref.slot))
            self.model.encode(pad_rows(sources, self.config.pad_id).to(self.device), hooks)
            means = encoder_layer_means(hooks.take(), self.config.encoder_layers)
        finally:
            self.modules.release(lease)
        means = means.float().cpu()  # [layers, rows, src_len, k]
        return SourceProportions(domains, [means[:, row, : len(source)]
                                           for row, source in enumerate(sources)])

    def translate_texts(self, texts: Sequence[str], members: Sequence[Member] = (),
                        options: SearchOptions | None = None) -> list[str]:
        """Convenience for tools and tests: same members for every text, best hypothesis."""
        chosen = tuple(members) or (Member(None),)
        ids = self.source_tokenizer.encode(texts)
        jobs = [SentenceJob(i, chosen, self.max_length(len(i))) for i in ids]
        results = self.translate(jobs, options or SearchOptions())
        return [self.target_tokenizer.decode(r[0].tokens) for r in results]


def step_hook(engine: Engine, lease: Lease, jobs: Sequence[SentenceJob]) -> StepHook | None:
    """The step hook of a batch whose sentence i is `jobs[i]` (None: no guidance)."""
    return batch_hook(dict(enumerate(sentence_guides(engine, [lease] * len(jobs), jobs))))


def sentence_guides(engine: Engine, leases: Sequence[Lease],
                    jobs: Sequence[SentenceJob]) -> list[list[SentenceGuide]]:
    """Every job's guides: its own, after a kNN datastore of its neighbours (if any)."""
    guides: list[list[SentenceGuide]] = [list(job.guides) for job in jobs]
    wanted = [(i, job.neighbours) for i, job in enumerate(jobs)
              if job.neighbours is not None and job.neighbours.pairs]
    built = build_guides(engine, [(lead_key(leases[i], jobs[i].members), neighbours)
                                  for i, neighbours in wanted])
    for (i, _), guide in zip(wanted, built, strict=True):
        if guide is not None:
            guides[i].insert(0, guide)
    return guides


def check_lengths(jobs: Sequence[SentenceJob], config: BackboneConfig) -> None:
    """Sources and target budgets must fit the backbone's position table."""
    too_long = [len(j.source_ids) for j in jobs if len(j.source_ids) > config.max_positions]
    if too_long:
        raise ValueError(f"source of {max(too_long)} tokens exceeds the backbone's "
                         f"{config.max_positions} positions")
    over = [j.max_length for j in jobs if j.max_length > config.max_positions]
    if over:
        raise ValueError(f"max_length {max(over)} exceeds the backbone's "
                         f"{config.max_positions} positions")


def _key_ranks(lease: Lease) -> dict[str | None, int]:
    """A sort rank per module id: rows of one (bank, slot) become contiguous."""
    ranks: dict[str | None, int] = {None: -1}
    keyed = sorted(lease.refs.items(), key=lambda item: (id(item[1].bank), item[1].slot))
    for rank, (module_id, _) in enumerate(keyed):
        ranks[module_id] = rank
    return ranks


def with_ids(options: SearchOptions, config: BackboneConfig) -> SearchOptions:
    return SearchOptions(beam_size=options.beam_size, n_best=options.n_best,
                         length_penalty=options.length_penalty, min_length=options.min_length,
                         start_id=config.decoder_start_id, eos_id=config.eos_id)


def pad_rows(sequences: Sequence[Sequence[int]], pad_id: int) -> Tensor:
    out = torch.full((len(sequences), max(len(s) for s in sequences)), pad_id, dtype=torch.long)
    for row, sequence in enumerate(sequences):
        out[row, : len(sequence)] = torch.tensor(sequence, dtype=torch.long)
    return out


def _projection(model: Backbone) -> nn.Module:
    """The output layer as an nn.Linear (so int8 quantization covers it too)."""
    weight = model.output_weight()
    linear = nn.Linear(weight.shape[1], weight.shape[0], bias=model.config.output_bias)
    linear.weight = nn.Parameter(weight.detach().clone(), requires_grad=False)
    if model.config.output_bias:
        linear.bias = nn.Parameter(model.output_bias.detach().clone(), requires_grad=False)
    return linear.eval()


def _as_linear(module: nn.Module) -> nn.Linear:
    assert isinstance(module, nn.Linear)
    return module


def _fuse_self_attention(model: Backbone, tensors: dict[str, Tensor], *, int8: bool,
                         pack: bool, device: torch.device, dtype: torch.dtype) -> None:
    """Give every self-attention one [3d, d] projection for q, k and v
    (`Attention.fuse_qkv`): one call instead of three on the same input saved a third of
    their time at a decoding step (128 rows, d=512: 148 against 218 us int8)."""
    for path, module in model.named_modules():
        if not (isinstance(module, Attention) and module.name == "self_attn"):
            continue
        if int8:
            module.fuse_qkv(_fused_int8(module))
            continue
        weight = torch.cat([tensors[f"{path}.{p}_proj.weight"] for p in "qkv"]).float()
        bias = torch.cat([tensors[f"{path}.{p}_proj.bias"] for p in "qkv"]).float()
        fused = nn.Linear(weight.shape[1], weight.shape[0])
        fused.weight = nn.Parameter(weight, requires_grad=False)
        fused.bias = nn.Parameter(bias, requires_grad=False)
        linear: nn.Module = PackedLinear.wrap(fused.eval()) if pack else fused.eval()
        module.fuse_qkv(linear.to(device, dtype))


def _fused_int8(attention: Attention) -> nn.Module:
    """The dynamic int8 q/k/v projections as one: their int8 weights stacked, each output
    channel keeping its own matrix's scale, so the result is the three layers' (the input
    is quantized once, with the same parameters each of them computed)."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    parts = [getattr(attention, f"{p}_proj") for p in "qkv"]
    weights = [part.weight() for part in parts]  # per-tensor qint8, zero point 0
    stacked = torch.cat([w.int_repr() for w in weights])
    scales = torch.cat([torch.full((w.shape[0],), w.q_scale(), dtype=torch.float64)
                        for w in weights])
    zero_points = torch.cat([torch.full((w.shape[0],), w.q_zero_point(), dtype=torch.long)
                             for w in weights])
    weight = torch._make_per_channel_quantized_tensor(stacked, scales, zero_points, 0)
    fused = DynamicLinear(stacked.shape[1], stacked.shape[0], dtype=torch.qint8)
    fused.set_weight_bias(weight, torch.cat([part.bias() for part in parts]))
    return fused


def _quantize(model: Backbone, project: nn.Module) -> tuple[Backbone, nn.Module]:
    from torch.ao.quantization import quantize_dynamic  # deprecated upstream, still shipped

    quantized = quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    quantized_project = quantize_dynamic(nn.Sequential(project), {nn.Linear}, dtype=torch.qint8)
    return quantized, quantized_project
