#!/usr/bin/env bash
# Builds everything and runs the whole test suite (ctest, then pytest).
# Usage: scripts/test.sh            (installs dependencies on first use)
# Env:   PAGODA_CUDA=ON|OFF (default: ON when nvcc is found), JOBS (default: nproc)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --python

jobs=${JOBS:-$(nproc)}
cuda_flag=()
[ -n "${PAGODA_CUDA:-}" ] && cuda_flag=(-DPAGODA_CUDA="$PAGODA_CUDA")
[ -x /usr/local/cuda/bin/nvcc ] && export PATH=/usr/local/cuda/bin:$PATH

# 1. Main build (Release; the CUDA backend compiles when nvcc exists) and ctest.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPAGODA_TESTS=ON "${cuda_flag[@]}" >/dev/null
ninja -C build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs" --label-exclude sanitize

# 2. Sanitizer build with clang: libFuzzer targets (short runs) and the
#    randomized stress tests under AddressSanitizer + UBSan.
cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPAGODA_CUDA=OFF \
  -DPAGODA_FUZZ=ON -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
ninja -C build-san -j "$jobs" pagoda_sanitize_targets
ctest --test-dir build-san --output-on-failure -j "$jobs" --label-regex sanitize

# 3. Python tests: differential tokenizer/template tests, the OpenAI SDK
#    against `pagoda serve` (fake engine, then the real engine on
#    stories260K), the bench client.
PAGODA_BIN="$PWD/build/pagoda" .venv/bin/python -m pytest -q
PAGODA_TEST_REAL_ENGINE=1 PAGODA_BIN="$PWD/build/pagoda" .venv/bin/python -m pytest -q tests/python/server
