#!/usr/bin/env bash
# End-to-end checks of pagoda on the GPU, against transformers (device
# machine; run by tests/gpu/run.sh, or alone):
#   OUT=<dir> bash tests/gpu/hooks/e2e.sh BUILD_DIR
# hook-timeout: 360
#
# BUILD_DIR holds `pagoda` (and lib/ with the shared libraries the device
# image lacks): see tests/gpu/hooks/lib/stage_build.sh. Steps, each run even
# when an earlier one failed (exit status non-zero if any failed):
#   1. tools/hf_e2e.py: random bf16 models created here with transformers --
#      llama (GQA, llama3 rope scaling; also --enforce-eager), mistral, qwen2
#      (q/k/v biases), qwen3 (q/k norms), phi3 (pre-fused tensors, longrope,
#      window on every layer), phi4_mini (Phi-4-mini's partial rotary
#      embedding over 96 of 128 dims, tied 200k vocabulary), gemma2 / gemma3 (soft-capping,
#      sliding windows, sandwich norms), mixtral / qwen2_moe / qwen3_moe --
#      stories260K, the Llama-3.1-8B
#      shape last; `pagoda serve` with the llama model and one completions
#      request. Table in the log, details in $OUT/e2e_details.json.
#   2. engine tests with PAGODA_TEST_DEVICE=cuda, when BUILD_DIR has them
#      (tests/unit/engine/*): the engine on the GPU in bf16 against the f32
#      CPU reference, within the tolerances of tests/unit/engine/engine_harness.h
#      (each comparison prints a "[   cuda   ]" line with what it measured).
#   3. the OpenAI-SDK server suite (tests/python/server) against
#      `pagoda serve stories260K --device cuda` (PAGODA_TEST_REAL_ENGINE=1),
#      when python3 can import openai, requests and pytest, or they can be
#      installed from PAGODA_E2E_WHEELS (offline wheels for the device's
#      Python: tests/gpu/hooks/lib/fetch_wheels.sh DIR, run here).
# Environment:
#   PAGODA_E2E_STORIES  stories260K folder (default .devcarry/stories260K;
#                       skipped with a note when absent)
#   PAGODA_E2E_MODELS   the model list to pass instead (hf_e2e.py --models)
#   PAGODA_E2E_8B_LAYERS  fewer layers for the 8B shape (default: all 32)
#   PAGODA_E2E_SKIP_8B=1  leave the 8B shape out
#   PAGODA_E2E_WHEELS   folder of wheels for step 3 (default .devcarry/wheels)
set -u
build=$(cd "${1:?usage: e2e.sh BUILD_DIR}" && pwd) || exit 2
repo=$(cd "$(dirname "$0")/../../.." && pwd)
out=${OUT:-$PWD/gpu-out}
work=${PAGODA_E2E_WORK:-/tmp/pagoda-e2e}
mkdir -p "$out" "$work"
status=0
summary=()

note() {  # note NAME RESULT SECONDS [WHY]
  summary+=("$(printf '%-16s %-5s %5ss %s' "$1" "$2" "$3" "${4:-}")")
  [ "$2" = FAIL ] && status=1
  return 0
}

# Libraries: the staged ones, the libfmt copy beside kernel_test, CUDA's.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib "$build/tests/gpu" "$build/lib"; do
  [ -d "$d" ] && LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
export LD_LIBRARY_PATH
pagoda=$build/pagoda
if [ ! -x "$pagoda" ]; then
  echo "e2e: missing $pagoda (stage it: tests/gpu/hooks/lib/stage_build.sh BUILD $build)"
  exit 1
fi
if ldd "$pagoda" | grep "not found"; then
  echo "e2e: $pagoda has unresolved libraries (above): stage them with tests/gpu/hooks/lib/stage_build.sh"
  exit 1
fi
"$pagoda" version || true

# ---- 1. transformers comparison ---------------------------------------------
stories=${PAGODA_E2E_STORIES:-$repo/.devcarry/stories260K}
models="llama,mistral,qwen2,qwen3,phi3,phi4_mini,gemma2,gemma3,mixtral,qwen2_moe,qwen3_moe"
if [ -f "$stories/config.json" ]; then
  models+=",stories=$stories"
else
  note stories260K SKIP 0 "no $stories (carry .devcarry/stories260K)"
fi
free_gb=$(df -BG --output=avail "$work" | tail -n 1 | tr -dc 0-9)
if [ "${PAGODA_E2E_SKIP_8B:-0}" = 1 ]; then
  note llama8b SKIP 0 "PAGODA_E2E_SKIP_8B=1"
elif [ "${free_gb:-0}" -lt 24 ]; then
  note llama8b SKIP 0 "only ${free_gb} GB free in $work (the 8B shape needs ~17 GB)"
else
  models+=",llama8b"
fi
models=${PAGODA_E2E_MODELS:-$models}
layers=()
[ -n "${PAGODA_E2E_8B_LAYERS:-}" ] && layers=(--layers "$PAGODA_E2E_8B_LAYERS")
echo "=== hf_e2e: $models ($(date +%T)); ${free_gb} GB free in $work"
t0=$SECONDS
if PYTHONUNBUFFERED=1 python3 "$repo/tools/hf_e2e.py" --pagoda "$pagoda" --models "$models" --work "$work" \
     --details "$out/e2e_details.json" --eager-too llama --serve llama "${layers[@]}"; then
  note hf_e2e PASS $((SECONDS - t0))
else
  note hf_e2e FAIL $((SECONDS - t0)) "see the table above and $out/e2e_details.json"
fi
rm -rf "$work"

# ---- 2. engine tests on the CUDA backend -------------------------------------
engine_bins=()
if [ -d "$build/tests/unit/engine" ]; then
  while IFS= read -r f; do engine_bins+=("$f"); done \
    < <(find "$build/tests/unit/engine" -maxdepth 1 -type f -executable | sort)
fi
if [ ${#engine_bins[@]} -eq 0 ]; then
  note engine_cuda SKIP 0 "no engine test binaries in $build/tests/unit/engine"
fi
# The tests take their inputs from $PAGODA_SHARED_DIR (stories260K under
# models/: ../shared beside the checkout, made here from the carried
# stories260K when absent) and $PAGODA_TEST_DATA (this checkout's tests/data);
# the paths compiled into the binaries are the development machine's.
shared=$repo/../shared
if [ ! -e "$shared" ] && [ -d "$stories" ]; then
  mkdir -p "$shared/models" && ln -s "$stories" "$shared/models/stories260K"
  # The tokenizers of the server suite's random-weight models, when carried
  # (.devcarry/shared/models/tokenizers; absent: those tests skip).
  tokenizers=$repo/.devcarry/shared/models/tokenizers
  [ -d "$tokenizers" ] && ln -s "$tokenizers" "$shared/models/tokenizers"
fi
for bin in "${engine_bins[@]}"; do
  name=$(basename "$bin")
  if ! grep -q PAGODA_TEST_DEVICE "$bin"; then  # it would run on the CPU: no CUDA check
    note "$name" SKIP 0 "does not read PAGODA_TEST_DEVICE"
    continue
  fi
  echo "=== $name with PAGODA_TEST_DEVICE=cuda ($(date +%T))"
  t0=$SECONDS
  if PAGODA_TEST_DEVICE=cuda PAGODA_SHARED_DIR="$shared" PAGODA_TEST_DATA="$repo/tests/data" \
       timeout --kill-after=10 150 "$bin" --gtest_color=no; then
    note "$name" PASS $((SECONDS - t0))
  else
    note "$name" FAIL $((SECONDS - t0))
  fi
done

# ---- 3. OpenAI SDK against pagoda serve on the GPU ---------------------------
pylib=$work/pylib
wheels=${PAGODA_E2E_WHEELS:-$repo/.devcarry/wheels}
if ! python3 -c "import openai, requests, pytest, jsonschema" 2>/dev/null && [ -d "$wheels" ]; then
  mkdir -p "$pylib"
  python3 -m pip install -q --no-index --find-links "$wheels" --target "$pylib" openai requests pytest jsonschema \
    >"$out/wheels.log" 2>&1 || echo "e2e: installing wheels from $wheels failed (see $out/wheels.log)"
fi
if PYTHONPATH="$pylib${PYTHONPATH:+:$PYTHONPATH}" python3 -c "import openai, requests, pytest, jsonschema" 2>/dev/null; then
  echo "=== OpenAI SDK server suite, pagoda serve --device cuda ($(date +%T))"
  t0=$SECONDS
  if PYTHONPATH="$pylib${PYTHONPATH:+:$PYTHONPATH}" PAGODA_TEST_REAL_ENGINE=1 PAGODA_TEST_DEVICE=cuda \
     PAGODA_BIN="$pagoda" PAGODA_SHARED_DIR="$shared" timeout --kill-after=10 200 \
     python3 -m pytest -q -p no:cacheprovider "$repo/tests/python/server"; then
    note openai_sdk PASS $((SECONDS - t0))
  else
    note openai_sdk FAIL $((SECONDS - t0))
  fi
else
  note openai_sdk SKIP 0 "python3 lacks openai/requests/pytest and no wheels in $wheels"
fi
rm -rf "$pylib"

echo
echo "=== e2e summary"
printf '%s\n' "${summary[@]}"
exit $status
