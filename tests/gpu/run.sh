#!/usr/bin/env bash
# Everything that needs the GPU, in one device call.
#
# Usage: OUT=<dir> tests/gpu/run.sh BUILD_DIR
#   BUILD_DIR: a build folder configured with -DPAGODA_CUDA=ON in which
#   `ninja kernel_test kernel_bench comm_test comm_bench` ran (it may have
#   been built on another machine and carried here).
#
# Stages, each run even when an earlier one failed (the exit status is
# non-zero when any failed); the whole script stays under ~8 minutes:
#   1. nvidia-smi
#   2. kernel tests (GoogleTest)                  -> $OUT/kernel_test.log
#   3. compute-sanitizer memcheck, test subset    -> $OUT/memcheck.log
#      and racecheck on attention (prefill, split decode, the decode
#      kernel's warp merge) and the FP8 linear's tensor-core kernels
#      (shared-memory pipeline / warp merge)          -> $OUT/racecheck.log
#   4. hooks: every tests/gpu/hooks/*.sh, run as `hook BUILD_DIR` (end-to-end
#      tests, benchmarks; comm.sh: the NCCL communicators on every GPU;
#      skipped when there are none) -> $OUT/<hook>.log;
#      90 s each unless the hook has a line "# hook-timeout: SECONDS"
#   5. kernel microbenchmarks (last)              -> $OUT/kernel_bench.txt
# A summary table is printed at the end.
set -u
build=$(cd "${1:?usage: tests/gpu/run.sh BUILD_DIR}" && pwd) || exit 2
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
bin=$build/tests/gpu
summary=()
status=0

record() {  # record NAME RESULT SECONDS
  summary+=("$(printf '%-12s %-6s %5ss' "$1" "$2" "$3")")
  [ "$2" = FAIL ] && status=1
  return 0
}

# Runs "$@" with a time limit, output tee'd to LOG; returns the command's status.
run_logged() {  # run_logged LOG SECONDS CMD...
  local log=$1 limit=$2
  shift 2
  timeout --signal=TERM --kill-after=10 "$limit" "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 124 ] && echo "TIMEOUT after ${limit}s: $*" | tee -a "$log"
  return "$rc"
}

stage() {  # stage NAME SECONDS LOG CMD...: runs, times and records one stage
  local name=$1 limit=$2 log=$3
  shift 3
  echo
  echo "=== $name ($(date +%T))"
  local t0=$SECONDS
  if run_logged "$log" "$limit" "$@"; then
    record "$name" PASS $((SECONDS - t0))
  else
    record "$name" FAIL $((SECONDS - t0))
  fi
}

# cuBLASLt is linked dynamically: take the device's CUDA libraries, and look
# further when the loader still cannot find it.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib; do
  [ -d "$d" ] && LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
export LD_LIBRARY_PATH
if [ -x "$bin/kernel_test" ] && ldd "$bin/kernel_test" | grep -q "not found"; then
  lt=$(find /usr /opt -name 'libcublasLt.so.13*' 2>/dev/null | head -n 1)
  [ -n "$lt" ] && export LD_LIBRARY_PATH="$(dirname "$lt"):$LD_LIBRARY_PATH"
  ldd "$bin/kernel_test" | grep "not found" && echo "warning: unresolved libraries (see above)"
fi

export PAGODA_REQUIRE_GPU=1  # kernel tests fail (not skip) without a CUDA backend

echo "=== nvidia-smi ($(date +%T))"
if nvidia-smi; then record nvidia-smi PASS 0; else record nvidia-smi FAIL 0; fi

if [ -x "$bin/kernel_test" ]; then
  stage kernel_test 180 "$out/kernel_test.log" "$bin/kernel_test" --gtest_color=no
  if command -v compute-sanitizer >/dev/null 2>&1; then
    filter='CudaOpsTest.EmbeddingAndGatherRowsCopyExactly:CudaOpsTest.RmsNormMatchesCpu'
    filter+=':CudaOpsTest.AddRmsNormMatchesCpu:CudaOpsTest.KvWriteMatchesCpu'
    filter+=':CudaOpsTest.CopyBlocksMatchesCpu:CudaOpsTest.SiluMulMatchesCpu:CudaOpsTest.RopeMatchesCpu'
    filter+=':CudaOpsTest.LinearMatchesCpu'
    filter+=':CudaQuantLinearTest.GraphReplayMatchesEager:CudaFp8LinearTest.GraphReplayMatchesEager'
    filter+=':CudaAttentionTest.DecodeOnly:CudaAttentionTest.PrefillOnly'
    filter+=':CudaAttentionTest.MixedPrefillAndDecode:CudaSamplingTest.MatchesCpuOnTiedLogits'
    filter+=':CudaSamplingTest.TwoSlotsOutstandingAndSampledTokensOnTheDevice'
    filter+=':CudaSamplingTest.SplitRowsMatchCpuOnTinyAndOddVocabularies'
    filter+=':CudaMoeTest.RouteAndExpertsReplayInAGraphWithNewRouting'
    filter+=':CudaAttentionFp8Test.SmallBatchesOfEveryKernel:CudaAttentionFp8Test.KvWriteBytes'
    filter+=':CudaFusedDecodeTest.GraphReplayMatchesEager'
    stage memcheck 100 "$out/memcheck.log" compute-sanitizer --tool memcheck --error-exitcode 1 \
      --print-limit 20 "$bin/kernel_test" --gtest_color=no --gtest_filter="$filter"
    # Shared-memory hazards of the attention tiles, the quantized decode
    # kernel's stages, the MoE kernels' groups and GEMM stages and the fused
    # decode kernel's shared rows (a missing barrier).
    stage racecheck 90 "$out/racecheck.log" compute-sanitizer --tool racecheck --error-exitcode 1 \
      --print-limit 20 "$bin/kernel_test" --gtest_color=no \
      --gtest_filter='CudaAttentionTest.PrefillOnly:CudaAttentionTest.GraphReplayWithinCapturedHints:CudaAttentionTest.DecodeKernelGraphReplay:CudaQuantLinearTest.GraphReplayMatchesEager:CudaMoeTest.RouteAndExpertsReplayInAGraphWithNewRouting:CudaAttentionFp8Test.SmallBatchesOfEveryKernel:CudaFp8LinearTest.GraphReplayMatchesEager:CudaFusedDecodeTest.GraphReplayMatchesEager'
  else
    echo "compute-sanitizer not found"
    record memcheck FAIL 0
  fi
else
  echo "missing $bin/kernel_test (build it: ninja -C BUILD_DIR kernel_test kernel_bench)"
  record kernel_test FAIL 0
fi

shopt -s nullglob
hooks=("$here"/hooks/*.sh)
if [ ${#hooks[@]} -eq 0 ]; then
  echo
  echo "=== hooks: none in tests/gpu/hooks (skipped)"
  record hooks SKIP 0
fi
for hook in "${hooks[@]}"; do
  name=$(basename "$hook" .sh)
  # A hook may declare its own limit with a line "# hook-timeout: SECONDS".
  limit=$(sed -n 's/^# hook-timeout: *\([0-9][0-9]*\).*/\1/p' "$hook" | head -n 1)
  stage "$name" "${limit:-90}" "$out/$name.log" bash "$hook" "$build"
done

if [ -x "$bin/kernel_bench" ]; then
  stage kernel_bench 90 "$out/kernel_bench.txt" "$bin/kernel_bench"
else
  echo "missing $bin/kernel_bench"
  record kernel_bench FAIL 0
fi

echo
echo "=== summary (logs in $out)"
grep -E "^\[  (PASSED|FAILED)" "$out/kernel_test.log" 2>/dev/null | tail -n 40
printf '%s\n' "${summary[@]}"
exit $status
