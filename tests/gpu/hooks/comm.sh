#!/usr/bin/env bash
# The NCCL communicators on every GPU of the device machine (run by
# tests/gpu/run.sh, or alone):
#   OUT=<dir> bash tests/gpu/hooks/comm.sh BUILD_DIR
# hook-timeout: 450
#
# BUILD_DIR holds tests/gpu/comm_test and tests/gpu/comm_bench (ninja
# comm_test comm_bench). Steps, both run (exit status non-zero if either
# failed):
#   1. comm_test: all-reduce (NCCL, one-shot on the push and the barrier
#      protocol, default threshold) against a host sum, bitwise equal on
#      every rank, eager and in CUDA graphs; the fused all-reduce + residual
#      add + RMSNorm against a host reference and the unfused ops; a stress
#      run of 2,000 mixed all-reduces with skewed ranks; aborts; the column
#      gather; send/recv ring. With fewer than 2 GPUs its GPU tests say SKIP.
#   2. comm_bench: latency per size (2 B to 64 MiB), NCCL vs one-shot push
#      vs one-shot barrier, eager and graph, then the fused op (each
#      protocol) vs unfused vs NCCL (tables in the log and
#      $OUT/comm_bench.txt).
# NCCL: $PAGODA_NCCL_LIBRARY, else libnccl.so.2 on the loader path, else the
# lib folder of Python's nvidia-nccl-cu12/13 wheel (added to LD_LIBRARY_PATH).
set -u
build=$(cd "${1:?usage: comm.sh BUILD_DIR}" && pwd) || exit 2
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
bin=$build/tests/gpu
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}  # never NVLink multicast on shared machines

if [ -z "${PAGODA_NCCL_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2'; then
  wheel_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
  if [ -n "$wheel_lib" ] && [ -f "$wheel_lib/libnccl.so.2" ]; then
    export LD_LIBRARY_PATH="$wheel_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "comm.sh: NCCL from $wheel_lib"
  else
    echo "comm.sh: no libnccl.so.2 found (pip install nvidia-nccl-cu13, or set PAGODA_NCCL_LIBRARY)"
  fi
fi

status=0
for b in comm_test comm_bench; do
  if [ ! -x "$bin/$b" ]; then
    echo "FAIL: missing $bin/$b (build it: ninja -C BUILD_DIR comm_test comm_bench)"
    status=1
  fi
done
[ $status -eq 0 ] || exit 1

echo "=== comm_test ($(date +%T))"
if timeout --kill-after=10 300 "$bin/comm_test" --gtest_color=no; then
  echo "comm_test: PASS"
else
  echo "comm_test: FAIL"
  status=1
fi
echo
echo "=== comm_bench ($(date +%T))"
if timeout --kill-after=10 120 "$bin/comm_bench" 2>&1 | tee "$out/comm_bench.txt"; [ "${PIPESTATUS[0]}" -eq 0 ]; then
  echo "comm_bench: PASS"
else
  echo "comm_bench: FAIL"
  status=1
fi
exit $status
