"""The server itself on a GPU under load, against the engine offline and CTranslate2 on the
same card, in one run of about 8 minutes (benchmarks/speed/gpu/gpu_serve_run.sh on a lent GPU).

    python -m benchmarks.speed.gpu.serve_gpu [--device cuda] [--dtype float16] [--data DIR]
                                   [--tiny] [--levels 1,8,64] [--no-ct2] [--out DIR]

1. served vs offline (`benchmarks/speed/serve/serve_load.py`'s measurement): the real
   `python -m server` with the embedded default model in `--dtype` on `--device`, closed-
   loop clients at each level (p50/p99 latency), then interleaved rounds of the saturation
   level served again and the engine offline on those rounds' inputs in its fastest
   setting there (fixed-shape steps replayed as CUDA graphs, the server's default on CUDA);
2. the ceiling: CTranslate2's `translate_batch` (`--dtype` as its compute type) on the same
   card, on the drawn requests' sentences cut into the batches the offline engine's packing
   cuts, with the backbone exported by converters/ct2.py (it runs the plain backbone: it
   has no domain modules);
3. an admin upload + activate while under load: a new version of a served domain's module
   is uploaded and activated through `/admin` while the top level's clients keep sending
   (rounds of the top level until both calls are answered);
   reported: failed requests during it and the upload and activate times.

`--device cpu --tiny` rehearses every step on a toy store (tests/benchmarks). Writes
<out>/serve_gpu.json and .md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import platform
import secrets
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import torch

from benchmarks.live_server import live_server
from benchmarks.locations import RESULTS_DIR
from benchmarks.report_files import write_report
from benchmarks.speed.model import quiet_libraries
from benchmarks.speed.serve import config as serve_config
from benchmarks.speed.serve import serve_load
from benchmarks.speed.serve import store as speed_store
from benchmarks.speed.serve.config import LoadPlan, ServeConfig
from benchmarks.speed.serve.loadgen import (
    Outcome,
    build_requests,
    run_level,
    served_domains,
    warm_up,
)
from benchmarks.speed.serve.loadstats import markdown as load_markdown
from benchmarks.speed.serve.loadstats import saturation, write_results
from benchmarks.speed.serve.offline import offline_engine, pack, text_jobs
from benchmarks.speed.serve.store import StoreSpec, backbone_files, load_module
from model_store import Store
from model_store.archive import pack_artifact_dir
from server.core.settings import EngineSettings
from server.decoding.search import SearchOptions
from server.engine.engine import Member
from server.textproc.document import build_document

PLAN = LoadPlan((1, 8, 64), max_requests=400, max_seconds=25.0,
                offline_seconds=30.0, pairs=3, round_requests=400)
TINY = replace(serve_config.TINY, levels=(1, 4))


@dataclass(frozen=True)
class Ceiling:
    """CTranslate2 on the saturation level's sentences, in the offline engine's batches."""

    compute_type: str
    sentences: int
    target_tokens: int
    seconds: float

    @property
    def tokens_per_s(self) -> float:
        return self.target_tokens / max(self.seconds, 1e-9)


@dataclass(frozen=True)
class Flip:
    """An admin upload + activate during load."""

    domain: str
    upload_status: int
    activate_status: int
    upload_s: float
    activate_s: float
    requests: int
    failed: int


def ct2_ceiling(spec: StoreSpec, texts: Sequence[str], config: ServeConfig, *,
                device: str, compute_type: str, scratch: Path) -> Ceiling:
    """`texts` split and tokenized as the server does, cut into the batches the offline
    engine's packing would cut for the plain backbone, through CTranslate2."""
    import ctranslate2

    from converters.ct2 import export_ct2

    files = backbone_files(spec)
    engine = offline_engine(files, [], lambda name, version: load_module(spec, name, version),
                            config.engine_options())
    model_dir = export_ct2(files, scratch / "ct2")
    translator = ctranslate2.Translator(str(model_dir), device=device,
                                        compute_type=compute_type)
    options = SearchOptions(beam_size=config.beam_size)
    sentences = [(i, s) for i, text in enumerate(texts) for s in build_document(text).sources()]
    jobs = [job for _, job in text_jobs(engine, sentences, [(Member(None),)] * len(texts),
                                        length_ratio=config.length_ratio,
                                        max_length=config.max_length)]
    batches = pack(jobs, options, max_batch_tokens=config.max_batch_tokens,
                   max_modules=config.engine.slots_per_bank,
                   lookahead=config.lookahead_batches)
    piece = engine.source_tokenizer.processor.id_to_piece
    pieces = [[piece(t) for t in job.source_ids[:-1]] for job in jobs]  # CT2 adds EOS

    def run(batch: list[int]) -> int:
        results = translator.translate_batch(
            [pieces[i] for i in batch], beam_size=config.beam_size,
            max_decoding_length=max(jobs[i].max_length for i in batch))
        return sum(len(r.hypotheses[0]) for r in results)

    if batches:
        run(batches[0])  # warm-up, untimed
    started = time.perf_counter()
    tokens = sum(run(batch) for batch in batches)
    return Ceiling(compute_type, len(jobs), tokens, time.perf_counter() - started)


def module_archive(spec: StoreSpec, domain: str, scratch: Path) -> bytes:
    """The active version of `domain`, republished in a scratch store and packed as an
    operator uploads one (the server gives it the next version number)."""
    with spec.open() as store:
        loaded = store.load("module", domain)
    manifest = loaded.manifest
    with Store.open(scratch, builtin_dir=None) as copy:
        published = copy.publish("module", domain, dict(loaded.files), config=manifest.config,
                                 backbone_fingerprint=manifest.backbone_fingerprint)
    return pack_artifact_dir(scratch / "modules" / domain / f"v{published.version}")


def flip_under_load(spec: StoreSpec, sets: dict[str, list[str]], plan: LoadPlan,
                    config: ServeConfig, *, log: Path, seed: int) -> Flip | None:
    """Upload and activate a served domain's module again while the top level runs."""
    token = secrets.token_hex(16)
    environment = spec.environment() | config.environment() | {"NMT_ADMIN_TOKEN": token}
    with live_server(environment, log) as base_url:
        served = served_domains(base_url)
        if not served:
            return None
        domain = served[0]
        archive = module_archive(spec, domain, log.parent / "upload")
        requests = build_requests(sets, served, count=plan.distinct_requests, seed=seed)
        timeout_s = config.request_timeout_s + 30
        warm_up(base_url, requests, timeout_s=timeout_s)
        timings: dict[str, float | int] = {}

        def admin() -> None:
            time.sleep(min(2.0, plan.max_seconds / 4))  # the clients first reach full load
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=base_url, timeout=300.0, headers=headers) as client:
                started = time.perf_counter()
                upload = client.post(f"/admin/domains/{domain}/versions", content=archive,
                                     headers={"Content-Type": "application/gzip"})
                timings.update(upload_status=upload.status_code,
                               upload_s=time.perf_counter() - started)
                version = upload.json().get("version") if upload.status_code == 201 else None
                started = time.perf_counter()
                activated = client.post(f"/admin/domains/{domain}/activate",
                                        json={"version": version})
                timings.update(activate_status=activated.status_code,
                               activate_s=time.perf_counter() - started)

        worker = threading.Thread(target=admin, name="admin-flip")
        worker.start()
        outcomes: list[Outcome] = []
        while worker.is_alive() or not outcomes:  # load until the admin calls are answered
            run = asyncio.run(run_level(base_url, requests, concurrency=max(plan.levels),
                                        max_requests=plan.round_requests,
                                        max_seconds=plan.max_seconds, timeout_s=timeout_s))
            outcomes += run.outcomes
        worker.join()
    return Flip(domain, int(timings.get("upload_status", 0)),
                int(timings.get("activate_status", 0)), float(timings.get("upload_s", 0.0)),
                float(timings.get("activate_s", 0.0)), len(outcomes),
                sum(o.status != 200 for o in outcomes))


def device_name(device: str) -> str:
    if device.startswith("cuda") and torch.cuda.is_available():
        return (f"{torch.cuda.get_device_name(torch.device(device))} (CUDA "
                f"{torch.version.cuda}, driver via nvidia-smi in the run's checks.txt)")
    return f"CPU ({platform.processor() or platform.machine()})"


def report(result: serve_load.Served, ceiling: Ceiling | None, flip: Flip | None,
           meta: dict[str, Any]) -> str:
    lines = [load_markdown(result.levels, result.offline,
                           saturation(result.levels, result.offline, pairs=result.pairs),
                           meta, result.pairs), "## The ceiling: CTranslate2 on the same card",
             ""]
    if ceiling is None:
        lines.append("Not measured (`--no-ct2`, or CTranslate2 failed: see the log).")
    else:
        offline = result.offline.tokens_per_s
        lines.append(f"CTranslate2 {ceiling.compute_type}, beam {meta['beam_size']}: "
                     f"{ceiling.sentences} sentences, {ceiling.tokens_per_s:,.0f} target "
                     f"tokens/s; the engine offline {offline:,.0f} tokens/s "
                     f"({offline / max(ceiling.tokens_per_s, 1e-9):.2f}x of it, with the "
                     "routed domains' adapters that CTranslate2 does not run).")
    lines += ["", "## Admin upload + activate under load", ""]
    if flip is None:
        lines.append("Not measured (the store serves no domain module).")
    else:
        lines.append(f"`{flip.domain}`: upload {flip.upload_status} in {flip.upload_s:.2f} s, "
                     f"activate {flip.activate_status} in {flip.activate_s:.2f} s, while "
                     f"{flip.requests} requests were served with {flip.failed} failures.")
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed.gpu.serve_gpu",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", choices=("float32", "float16", "bfloat16"),
                        default="float16")
    parser.add_argument("--data", type=Path, help="corpora root (absent on a GPU host: "
                                                  "synthetic text)")
    parser.add_argument("--tiny", action="store_true", help="toy store and plan: rehearsal")
    parser.add_argument("--levels", help="comma-separated client counts (default 1,8,64)")
    parser.add_argument("--beam-size", type=int, default=ServeConfig().beam_size)
    parser.add_argument("--no-ct2", action="store_true", help="skip the CTranslate2 ceiling")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="results directory (default: results/)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    plan = TINY if args.tiny else PLAN
    if args.levels:
        plan = replace(plan, levels=tuple(int(v) for v in args.levels.split(",") if v))
    dtype = "float32" if args.device == "cpu" else args.dtype  # half types are CUDA-only
    config = ServeConfig(beam_size=args.beam_size,
                         engine=EngineSettings(device=args.device, dtype=dtype))
    out = args.out or RESULTS_DIR
    quiet_libraries()
    sets = speed_store.text_sets(args.data, per_set=plan.texts_per_set)
    with tempfile.TemporaryDirectory(prefix="serve-gpu-") as scratch_dir:
        scratch = Path(scratch_dir)
        spec = speed_store.seed_store(scratch / "store", tiny=args.tiny, data=args.data)
        counter = speed_store.token_counter(spec)
        result = serve_load.serve(spec, sets, plan, config, seed=args.seed,
                                  log=scratch / "server.log", count_tokens=counter)
        ceiling = None
        if not args.no_ct2:
            texts = [text for request in result.requests for text in request.texts]
            ceiling = ct2_ceiling(spec, texts, config, device=args.device, scratch=scratch,
                                  compute_type="float32" if args.device == "cpu" else dtype)
        flip = flip_under_load(spec, sets, plan, config, log=scratch / "flip.log",
                               seed=args.seed)
    meta = serve_load.metadata(plan, config, mode="tiny" if args.tiny else "gpu",
                               data=f"{len(sets)} text sets", served=result.domains)
    meta |= {"beam_size": config.beam_size, "device": device_name(args.device),
             "versions": meta["versions"] | _ct2_version(),
             "title": "The server on a GPU under load",
             "finished_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
    text = report(result, ceiling, flip, meta)
    write_results(result.levels, result.offline, meta, out / "tmp-serve-gpu",
                  pairs=result.pairs, stem="serve_gpu")
    summary: dict[str, Any] = {"meta": meta, "ceiling": None if ceiling is None else
               asdict(ceiling) | {"tokens_per_s": ceiling.tokens_per_s},
               "flip": None if flip is None else asdict(flip),
               "offline_tokens_per_s": result.offline.tokens_per_s,
               "pairs": [pair.ratio for pair in result.pairs]}
    write_report(out, "serve_gpu", summary, f"# The server on {meta['device']}\n\n" + text)
    print(text)
    return 0


def _ct2_version() -> dict[str, str]:
    try:
        import ctranslate2
    except ImportError:
        return {}
    return {"ctranslate2": ctranslate2.__version__}


if __name__ == "__main__":
    raise SystemExit(main())
