#!/usr/bin/env bash
# The server on a GPU under load (benchmarks/speed/gpu/serve_gpu.py) in one call on a lent GPU
# machine (the `device` tool), about 8 minutes. Results go to $OUT.
#
# The GPU image has torch but not the server's web and registry packages, and no package
# index: they travel in `.whl/site.tar.xz` (git-ignored), made here beforehand with
#   python -m benchmarks.speed.gpu.gpu_wheels
# and, for the CTranslate2 ceiling, `.whl/ct2.tar.xz` as gpu_device_run.sh's header says
# (without it the ceiling is skipped). The call carries `.whl`; the working tree plus
# `.whl` must stay under 64 MiB (move training snapshots out of the tree for the call).
#   run(command="bash benchmarks/speed/gpu/gpu_serve_run.sh", carry=[".whl"], timeout_s=570)
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT" /tmp/site
CHECKS="$OUT/checks.txt"
export PYTHONPATH=/tmp/site:$PWD

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"
  tar xJf .whl/site.tar.xz -C /tmp/site && echo "server packages unpacked"
  [ -f .whl/ct2.tar.xz ] && tar xJf .whl/ct2.tar.xz -C /tmp/site && echo "ctranslate2 unpacked"
  python3 -c "import server.app, fastapi, sqlalchemy, fasttext; print('server imports')"
} >"$CHECKS" 2>&1
CT2=$(grep -q "ctranslate2 unpacked" "$CHECKS" && echo "" || echo --no-ct2)
. benchmarks/speed/gpu/gpu_cublas12.sh

{
  echo "=== CUDA tests (engine, server)"
  timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/engine tests/server
  echo "pytest exit: $?"
} >>"$CHECKS" 2>&1

timeout "${BENCH_TIMEOUT:-360}" python3 -m benchmarks.speed.gpu.serve_gpu --device cuda \
  --dtype float16 $CT2 --out "$OUT" >"$OUT/bench.log" 2>&1
echo "benchmark exit: $?" >>"$CHECKS"
tail -8 "$CHECKS"
cat "$OUT/serve_gpu.md" 2>/dev/null || tail -40 "$OUT/bench.log"
