#!/usr/bin/env bash
# Issue #25's measurements in one call on a lent GPU machine (the `device` tool): the CUDA
# tests, CTranslate2 on the GPU, the GPU benchmark and its profile. Results go to $OUT.
#
# That machine has torch but no CTranslate2 and no package index, so CTranslate2 travels
# in an ignored folder, its wheel's two package folders packed with xz to fit the 64 MiB
# the working tree may take (the wheel's zip is too large beside the repository):
#   echo /.whl/ >> .git/info/exclude && mkdir -p .whl /tmp/ct2 && cd /tmp/ct2
#   pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --platform manylinux_2_28_x86_64 ctranslate2==4.8.5 && unzip -q ctranslate2-*.whl
#   tar cf - ctranslate2 ctranslate2.libs | xz -9 > <repository>/.whl/ct2.tar.xz
# and the device call carries `.whl` and runs `bash benchmarks/speed/gpu/gpu_device_run.sh`.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT" /tmp/site
CHECKS="$OUT/checks.txt"
export PYTHONPATH=/tmp/site:$PWD

{
  # the header every results file carries (docs/BENCHMARKS.md)
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  echo "Made by \`benchmarks/speed/gpu/gpu_device_run.sh\` on one $gpu GPU, $(date -u +%F)."
  echo
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"
  tar xJf .whl/ct2.tar.xz -C /tmp/site && echo "ctranslate2 unpacked"
  echo "=== CUDA tests"
  timeout 180 python3 -m pytest -q -p no:cacheprovider -m gpu tests/engine
  echo "pytest exit: $?"
} >"$CHECKS" 2>&1

. benchmarks/speed/gpu/gpu_cublas12.sh

# SYSTEMS and PROFILE may be given (a shorter run: one question, less device time)
SYSTEMS=${SYSTEMS:-ct2-float32,ct2-float16,ct2-int8_float16,engine-float32,engine-float16,engine-bfloat16,engine-float16-adapter,engine-float16-mixed8,engine-float16-mixed8-ungrouped,engine-float16-eager,engine-float16-mixed8-eager}
{
  echo "=== CTranslate2 smoke test (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})"
  timeout 150 python3 -m benchmarks.speed.gpu.engine_speed_gpu --tiny --device cuda \
    --systems ct2-float16,ct2-int8_float16,engine-float16 --out /tmp/tiny
} >>"$CHECKS" 2>&1 || {
  echo "=== CTranslate2 (or the engine) failed the smoke test: the engine alone" >>"$CHECKS"
  SYSTEMS=$(echo "$SYSTEMS" | tr , '\n' | grep -v '^ct2-' | paste -sd,)
}

timeout "${BENCH_TIMEOUT:-330}" python3 -m benchmarks.speed.gpu.engine_speed_gpu --systems "$SYSTEMS" \
  --profile "${PROFILE:-engine-float16,engine-float16-mixed8}" --out "$OUT" >"$OUT/bench.log" 2>&1
echo "benchmark exit: $?" >>"$CHECKS"
tail -5 "$CHECKS"
cat "$OUT/engine_speed_gpu.md" 2>/dev/null || tail -30 "$OUT/bench.log"
