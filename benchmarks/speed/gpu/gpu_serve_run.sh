#!/usr/bin/env bash
# The server on a GPU in one call on a lent GPU machine (the `device` tool), at most 9.5
# minutes, in parts, each under its own time limit so one part's overrun loses no other's
# results (seconds; their sum plus ~30 s of unpacking stays under the call's 570 s):
#   tests     100  the CUDA tests (pytest -m gpu) of the engine, decoding, server: the
#                  retrieval hook, forced-pair cache, device slots, cold loads among them
#   serve     230  benchmarks/speed/gpu/serve_gpu.py: served vs offline, p50/p99 at 1, 8
#                  and 64 clients, the CTranslate2 ceiling, an admin flip under load
#   tenants   140  benchmarks/speed/tenants/tenants.py on cuda: 1,000 modules (about a
#                  minute to publish), traffic over 1, 100 and 1,000 of them through 16
#                  device slots
#   retrieval  65  benchmarks/speed/gpu/retrieval_gpu.py: tokens/s with and without a
#                  memory at batch 32 and 1, beam 1 and 4
#   mixed      60  benchmarks/speed/batching/mixed_lengths.py on the GPU: continuous
#                  against static batching on mixed-length traffic (Poisson arrivals,
#                  synthetic sentences of 1-80 tokens)
#   bulk       90  benchmarks/speed/adversarial/bulk_share.py on the GPU: bulk batches and
#                  the LibreTranslate client beside a polite client, every bulk request
#                  answered (no documents phase: the GPU host lacks the converters' tools)
# mixed and bulk are not in the default PARTS: the four above fill the call; name them in
# PARTS (in place of parts already measured) to run them.
# PARTS=serve,tenants (say) runs only those; <PART>_TIMEOUT=seconds changes a limit.
# Results: $OUT/checks.txt (card, driver, torch, each part's exit and seconds, the tests'
# summary), each benchmark's markdown, and results.tar.xz (every part's json, markdown and
# log), rewritten after each part (a call brings back at most 8 files).
#
# The GPU image has torch but not the server's web and registry packages, and no package
# index: they travel in `.whl/site.tar.xz` (git-ignored), made here beforehand with
#   python -m benchmarks.speed.gpu.gpu_wheels
# and, for the CTranslate2 ceiling, `.whl/ct2.tar.xz` as gpu_device_run.sh's header says
# (without it the ceiling is skipped). The retrieval part reads the medical memory and test
# set from `.whl/medical.tar.xz` (without it that part is skipped; the bulk part takes its
# prose from the same test set, else synthetic text):
#   tar cJf .whl/medical.tar.xz -C ../shared/data/en-fr domains/medical/train.en \
#     domains/medical/train.fr domains/medical/test.en domains/medical/test.fr
# The call carries `.whl`; the working tree plus `.whl` must stay under 64 MiB (move
# training snapshots out of the tree for the call). Today the tracked files take ~44 MiB,
# site.tar.xz ~11 MiB, medical.tar.xz 0.3 MiB: CTranslate2's CUDA build (a 41 MiB wheel)
# does not fit beside them, so the ceiling needs a smaller tree for the call.
#   run(command="bash benchmarks/speed/gpu/gpu_serve_run.sh", carry=[".whl"], timeout_s=570)
# Rehearsal on a CPU (tiny settings, limits x SCALE_CPU=6, the project's venv, no carried
# packages needed):
#   DEVICE=cpu PY=.venv/bin/python OUT=/tmp/gpu-out bash benchmarks/speed/gpu/gpu_serve_run.sh
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu-out}
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}
PARTS=${PARTS:-tests,serve,tenants,retrieval}
TESTS_TIMEOUT=${TESTS_TIMEOUT:-100}
SERVE_TIMEOUT=${SERVE_TIMEOUT:-230}
TENANTS_TIMEOUT=${TENANTS_TIMEOUT:-140}
RETRIEVAL_TIMEOUT=${RETRIEVAL_TIMEOUT:-65}
MIXED_TIMEOUT=${MIXED_TIMEOUT:-60}
BULK_TIMEOUT=${BULK_TIMEOUT:-90}
WORK=$(mktemp -d /tmp/gpu-serve-run.XXXXXX)  # every part's files, bundled into $OUT
DATA=$WORK/data  # the retrieval part's memory and test set
mkdir -p "$OUT" /tmp/site "$DATA"
CHECKS="$OUT/checks.txt"
export PYTHONPATH=/tmp/site:$PWD

bundle() {  # written aside, then moved: a call stopped mid-write keeps the previous one
  tar cJf "$OUT/results.tar.xz.part" -C "$WORK" --exclude=./data . &&
    mv "$OUT/results.tar.xz.part" "$OUT/results.tar.xz"
}

part() {  # part NAME SECONDS COMMAND...: runs when PARTS names it, its output in NAME.log
  local name=$1 seconds=$(($2 * SCALE)) started=$SECONDS status
  shift 2
  case ",$PARTS," in *",$name,"*) ;; *) return 0 ;; esac
  echo "=== $name (limit $seconds s)" >>"$CHECKS"
  timeout -k 10 "$seconds" "$@" >"$WORK/$name.log" 2>&1
  status=$?
  echo "$name exit: $status in $((SECONDS - started)) s" >>"$CHECKS"
  bundle
}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available() and torch.cuda.get_device_name())"
  [ -f .whl/site.tar.xz ] && tar xJf .whl/site.tar.xz -C /tmp/site && echo "server packages unpacked"
  [ -f .whl/ct2.tar.xz ] && tar xJf .whl/ct2.tar.xz -C /tmp/site && echo "ctranslate2 unpacked"
  [ -f .whl/medical.tar.xz ] && tar xJf .whl/medical.tar.xz -C "$DATA" && echo "medical memory unpacked"
  $PY -c "import server.app, fastapi, sqlalchemy, fasttext; print('server imports')"
} >"$CHECKS" 2>&1
SCALE=1  # the parts' limits are the GPU's; a shared CPU takes longer, even on tiny settings
if [ "$DEVICE" = cpu ]; then  # the rehearsal: every part's code path, tiny
  SCALE=${SCALE_CPU:-6}
  SERVE=(--device cpu --tiny)
  TENANTS=(--modules 10 --spreads 10 --requests 8 --rounds 2 --clients 2 --slots 4
           --registry-modules 20)
  RETRIEVAL=(--device cpu --beams 1 --sentences 4 --repeats 1 --memory-pairs 400)
  MIXED=(--device cpu --tiny --quick --rate 10)
  BULK=(--device cpu --dtype float32 --requests 4 --items 4 --batches 1)
else
  . benchmarks/speed/gpu/gpu_cublas12.sh
  SERVE=(--device "$DEVICE" --dtype float16)
  TENANTS=(--device "$DEVICE" --dtype float16 --modules 1000 --spreads 100,1000
           --requests 240 --rounds 4 --clients 16 --registry-modules 0
           --store /tmp/tenants-store)
  RETRIEVAL=(--device "$DEVICE" --dtype float16 --beams 1,4 --sentences 48 --repeats 2)
  # a GPU serves far more than the CPU's 40 requests/s: arrivals must outrun both servers
  MIXED=(--device "$DEVICE" --dtype float16 --rate 300 --seconds 10 --rounds 1)
  BULK=(--device "$DEVICE" --dtype float16 --requests 40 --items 64 --batches 2)
fi
# after the cuBLAS 12 links: CTranslate2's CUDA build loads them when imported
CT2=$($PY -c "import ctranslate2" 2>/dev/null && echo "" || echo --no-ct2)
echo "CTranslate2 ceiling: ${CT2:-yes}" >>"$CHECKS"

part tests "$TESTS_TIMEOUT" $PY -m pytest -q -p no:cacheprovider -m gpu tests/engine \
  tests/decoding tests/server
grep -E "^(FAILED|ERROR)| (passed|failed|skipped|error)" "$WORK/tests.log" 2>/dev/null |
  tail -20 >>"$CHECKS"

part serve "$SERVE_TIMEOUT" $PY -m benchmarks.speed.gpu.serve_gpu "${SERVE[@]}" $CT2 \
  --out "$WORK/serve"
cp "$WORK/serve/serve_gpu.md" "$OUT/" 2>/dev/null

part tenants "$TENANTS_TIMEOUT" $PY -m benchmarks.speed.tenants.tenants "${TENANTS[@]}" \
  --out "$WORK/tenants"
cp "$WORK"/tenants/tenants*.md "$OUT/" 2>/dev/null

if [ -d "$DATA/domains/medical" ] || [ -n "${RETRIEVAL_DATA:-}" ]; then
  part retrieval "$RETRIEVAL_TIMEOUT" $PY -m benchmarks.speed.gpu.retrieval_gpu \
    "${RETRIEVAL[@]}" --data "${RETRIEVAL_DATA:-$DATA}" --out "$WORK/retrieval"
  cp "$WORK"/retrieval/memory_retrieval-speed-*.md "$OUT/" 2>/dev/null
else
  case ",$PARTS," in *",retrieval,"*)
    echo "=== retrieval skipped: no .whl/medical.tar.xz (nor RETRIEVAL_DATA)" >>"$CHECKS" ;;
  esac
fi

part mixed "$MIXED_TIMEOUT" $PY -m benchmarks.speed.batching.mixed_lengths "${MIXED[@]}" \
  --out "$WORK/mixed"
cp "$WORK"/mixed/mixed_lengths.md "$OUT/" 2>/dev/null

# bulk_share reads <data>/en-fr/domains/<domain>/test.en: the medical set, where it is
mkdir -p "$DATA/bulk" && ln -sfn "$DATA" "$DATA/bulk/en-fr"
part bulk "$BULK_TIMEOUT" $PY -m benchmarks.speed.adversarial.bulk_share "${BULK[@]}" \
  --documents 0 --data "$DATA/bulk" --out "$WORK/bulk"
cp "$WORK"/bulk/bulk_share*.md "$OUT/" 2>/dev/null

bundle
rm -rf "$WORK"
cat "$CHECKS"
for report in "$OUT"/*.md; do
  if [ -f "$report" ]; then tail -25 "$report"; fi
done
