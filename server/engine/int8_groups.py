"""One weight-only int8 matmul for all the modules of a mixed batch (CPU residual adapters).

A batch of 32 sentences mixing 8 adapters runs 8 groups of 4 rows through 8 modules'
matrices at every decoding step. One matmul per module pays a call's overhead 96 times a
step; torch's batched matmul (bfloat16 copies gathered per batch) reads 8 modules' bytes
at ~15 GB/s for 4 rows each and has no int8 form on the CPU. `int8_groups.c` reads each
module's int8 weights in place (bank slots, no per-batch copy), once per step for all of
its rows, with float32 rows and one scale per output column: in the engine benchmark
(benchmarks/results/engine_speed.md) 8 mixed adapters decode greedily at ~1.0x one
adapter, where the bfloat16 grouping read 0.88x.

The C source is compiled with the machine's compiler (`cc`, or `$CC`) when an engine with
`module_int8` starts (or at first use), once per machine, into a cache folder
($XDG_CACHE_HOME/nmt-server, else ~/.cache/nmt-server, else a temporary folder) under a
name keyed by the source, the flags and the CPU, and loaded with ctypes.
Where nothing compiles (no compiler, as in the slim images) `available()` is False and
int8 banks keep one fbgemm matmul per module (server/engine/packing.py).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import torch
from torch import Tensor

BLOCK = 64  # output columns per contiguous weight block (int8_groups.c)
SOURCE = Path(__file__).with_name("int8_groups.c")
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC")
SLOTS_KEY = "#slots"  # a grouped call's bank slots, in `ModuleBank.stacked`
# Calls below both run on one thread: a second saves little on them, and beside other busy
# threads (a server's event loop and clients) a parallel call waits at its end for a
# descheduled partner (benchmarks/results/engine_speed_bounds.md, session 17).
PARALLEL_BYTES = 512 * 1024  # int8 weights read by the call
PARALLEL_MACS = 8_000_000  # multiply-adds of the call
log = logging.getLogger(__name__)


def weights_key(name: str) -> str:
    """The key of matrix `name`'s int8 bank tensor in `ModuleBank.stacked`."""
    return f"{name}#int8"


def scales_key(name: str) -> str:
    """The key of matrix `name`'s per-column scales in `ModuleBank.stacked`."""
    return f"{name}#scales"


def available() -> bool:
    """Whether the kernel is built and loaded on this machine (built at the first call)."""
    return _library() is not None


def fits(out_features: int) -> bool:
    """Whether a matrix with this many output columns can run through the kernel."""
    return out_features % BLOCK == 0


def pack(matrices: Tensor) -> tuple[Tensor, Tensor]:
    """`[..., in, out]` float matrices as the kernel reads them: int8 `[..., out / 64, in,
    64]` (symmetric, 127 levels) and float32 scales `[..., out]`, one per output column."""
    matrices = matrices.detach().float()
    scales = matrices.abs().amax(dim=-2).clamp_min(1e-12) / 127.0
    quantized = (matrices / scales.unsqueeze(-2)).round_().clamp_(-127, 127).to(torch.int8)
    *lead, rows, columns = quantized.shape
    blocked = quantized.reshape(*lead, rows, columns // BLOCK, BLOCK).transpose(-3, -2)
    return blocked.contiguous(), scales.contiguous()


def matmul(x: Tensor, weights: Tensor, scales: Tensor, slots: Tensor, bias: Tensor, *,
           relu: bool) -> Tensor:
    """`x[g] @ W[slots[g]] + bias[g]` for every group g, ReLU'd if `relu`.

    x [groups, rows, in] float32 (bfloat16 rows, of the CPU bfloat16 path, run widened
    and come back in bfloat16); weights [n_slots, out / 64, in, 64] int8 and scales
    [n_slots, out] from `pack`; slots [groups] int64; bias [groups, 1, out] float32.
    """
    library = _library()
    if library is None:
        raise RuntimeError("the grouped int8 kernel is not available on this machine")
    groups, rows, k_dim = x.shape
    n_dim = scales.shape[-1]
    if (not x.is_floating_point() or weights.dtype != torch.int8 or
            weights.shape[1:] != (n_dim // BLOCK, k_dim, BLOCK) or slots.shape != (groups,)
            or bias.numel() != groups * n_dim):
        raise ValueError(f"grouped int8 matmul: mismatched inputs x {list(x.shape)}, "
                         f"weights {list(weights.shape)}, scales {list(scales.shape)}, "
                         f"slots {list(slots.shape)}, bias {list(bias.shape)}")
    wanted = x.dtype
    x, weights, scales = x.float().contiguous(), weights.contiguous(), scales.contiguous()
    slots, bias = slots.contiguous(), bias.float().contiguous()
    out = torch.empty((groups, rows, n_dim), dtype=torch.float32)
    weight_bytes = groups * k_dim * n_dim
    parallel = weight_bytes > PARALLEL_BYTES or weight_bytes * rows > PARALLEL_MACS
    library.nmt_grouped_int8(x.data_ptr(), groups, rows, k_dim, weights.data_ptr(),
                             scales.data_ptr(), slots.data_ptr(), bias.data_ptr(),
                             out.data_ptr(), n_dim, int(relu),
                             torch.get_num_threads() if parallel else 1)
    return out if wanted == torch.float32 else out.to(wanted)


@functools.cache
def _library() -> ctypes.CDLL | None:
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        log.info("no C compiler: int8 adapters run one matmul per module")
        return None
    try:
        source = SOURCE.read_bytes()
        key = hashlib.sha256(source + " ".join(FLAGS).encode() + _cpu().encode()).hexdigest()
        path = _cache_dir() / f"int8_groups-{key[:16]}.so"
        if not path.exists():
            _compile(compiler, path)
        library = ctypes.CDLL(str(path))
    except (OSError, subprocess.SubprocessError) as error:
        log.warning("the grouped int8 kernel did not build (%s): int8 adapters run one "
                    "matmul per module", error)
        return None
    kernel = library.nmt_grouped_int8
    kernel.restype = None
    i64, pointer = ctypes.c_int64, ctypes.c_void_p
    kernel.argtypes = [pointer, i64, i64, i64, pointer, pointer, pointer, pointer, pointer,
                       i64, ctypes.c_int, ctypes.c_int]
    return library


def _compile(compiler: str, path: Path) -> None:
    """Build into a file of this thread's own, then rename: processes and threads starting
    together (replicas, test workers) never load a half-written library."""
    partial = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.partial")
    try:
        subprocess.run([compiler, *FLAGS, "-o", str(partial), str(SOURCE)], check=True,
                       capture_output=True, timeout=120)
        os.replace(partial, path)
    except subprocess.CalledProcessError as error:
        stderr = error.stderr.decode(errors="replace").strip()
        raise subprocess.SubprocessError(f"{compiler} failed: {stderr[-500:]}") from None
    finally:
        partial.unlink(missing_ok=True)


def _cache_dir() -> Path:
    home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    folder = Path(home) / "nmt-server"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if os.access(folder, os.W_OK):
            return folder
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="nmt-server-kernels-"))


def _cpu() -> str:
    """What `-march=native` builds for: the CPU's model and instruction flags."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.machine() + platform.processor()
    wanted = ("model name", "flags")
    return "\n".join(next((line for line in lines if line.startswith(field)), "")
                     for field in wanted)
