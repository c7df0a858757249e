#!/usr/bin/env bash
# Fused dynamic-conv device check, one call on a GPU machine (repository root as the working directory):
#   1. build the fused dynamic-conv extension (torch.utils.cpp_extension.load, verbose),
#   2. run tests/test_dc_kernel.py (CUDA parity + the CPU tests; nothing is skipped for lack of CUDA),
#   3. run benchmarks/dynamic_conv.py (fused vs torch vs unfold, supernet step torch vs cuda).
# Everything lands in $OUT (default benchmarks/results/gpu_check/): env.txt, build.log,
# tests.log, tests.xml, bench.log, dynamic_conv.json, summary.json (7 files).
#
# Needs only torch, pytest, pyyaml, numpy, rich, safetensors (all in the device image; no deap,
# no datasets). Measured on an H200 (2026-12-04, two runs): build 21-31 s, tests 17-18 s,
# benchmark 19-25 s: 64-81 s of command time plus about a minute to start the machine. A
# timeout of 5 minutes leaves room for a rerun inside a 15-minute device budget:
#   device run: command "bash benchmarks/gpu_check.sh", timeout_s 300
# Then commit $OUT/dynamic_conv.json as benchmarks/results/dynamic_conv.json and update
# docs/results.md ("Fused dynamic convolution"). A test that crashes the interpreter stops the
# test step; rerun it under cuda-gdb (on the image) for a native backtrace.
set -uo pipefail

OUT="${OUT:-benchmarks/results/gpu_check}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export LVSEARCH_KERNEL_CACHE="${LVSEARCH_KERNEL_CACHE:-/tmp/lvsearch-kernels}"
export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}"
export MAX_JOBS="${MAX_JOBS:-4}"

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  command -v nvcc && nvcc --version | tail -2
  "$PY" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'device', torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)"
  echo "TORCH_CUDA_ARCH_LIST=$TORCH_CUDA_ARCH_LIST MAX_JOBS=$MAX_JOBS LVSEARCH_KERNEL_CACHE=$LVSEARCH_KERNEL_CACHE"
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

SECONDS=0
"$PY" - <<'EOF' 2>&1 | tee "$OUT/build.log"
import time
from lvsearch.kernels._extension import build_directory, load_extension
t0 = time.perf_counter()
ext = load_extension(verbose=True)
print(f"BUILD_OK {time.perf_counter() - t0:.1f}s in {build_directory()}")
EOF
build_rc=${PIPESTATUS[0]}
build_s=$SECONDS

SECONDS=0
tests_rc=99
if [ "$build_rc" -eq 0 ]; then
  "$PY" -m pytest -q -p no:cacheprovider tests/test_dc_kernel.py --junitxml="$OUT/tests.xml" 2>&1 | tee "$OUT/tests.log"
  tests_rc=${PIPESTATUS[0]}
fi
tests_s=$SECONDS

SECONDS=0
bench_rc=99
if [ "$build_rc" -eq 0 ]; then
  "$PY" benchmarks/dynamic_conv.py --out "$OUT/dynamic_conv.json" 2>&1 | tee "$OUT/bench.log"
  bench_rc=${PIPESTATUS[0]}
fi
bench_s=$SECONDS

cat >"$OUT/summary.json" <<EOF
{"build_rc": $build_rc, "build_s": $build_s, "tests_rc": $tests_rc, "tests_s": $tests_s,
 "bench_rc": $bench_rc, "bench_s": $bench_s, "tests_summary": "$( (grep -E '[0-9]+ (passed|failed|error)' "$OUT/tests.log" 2>/dev/null || echo "no pytest summary: the test step exited $tests_rc") | tail -n 1 | tr -d '"\\')"}
EOF
cat "$OUT/summary.json"
[ "$build_rc" -eq 0 ] && [ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
