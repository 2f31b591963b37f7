#!/usr/bin/env bash
# One device call: the reference 8B model, the ceilings, W1-W6 with pagoda and
# the HF transformers baseline, and a dated report.
#
# Usage (on the GPU machine, from the repository root):
#   bench/run_device.sh BUILD_DIR
# BUILD_DIR holds a built `pagoda` (CUDA build). Logs and the report go to
# $OUT (default /tmp/pagoda-bench-out); the report is also written to
# bench/results/<date>-<gpu>.{md,json}.
# Env: PAGODA_TOKENIZER_DIR (default ../shared/models/tokenizers/llama3_1, else
# .devcarry/tokenizers/llama3_1), PAGODA_COMMIT (the commit to report when the
# tree has no .git), MODEL_DIR (default /tmp/pagoda-llama3-8b;
# reused when it already holds the model), BUDGET_S (default 540: steps that
# would start after this many seconds are skipped), DEVICE (default cuda; cpu
# for a dry run of the script with a small MODEL_DIR).
#
# Reductions against /work/shared/BENCHMARKS.md so that the whole call ends
# under 9 minutes on an H100 (listed in the report too): W1 3 timed
# iterations; W2 200 requests of 1024/1024 (not 1000) and 1000 of 128/128;
# W3 20 requests at 1 req/s and 100 at 4, 16, 64 req/s and unbounded (not
# 500); W4 100 requests (not 200); HF baseline 2 timed repetitions, static
# batches 32 x 128/128 and 8 x 1024/256. Every pagoda step has a timeout.
set -uo pipefail

BUILD=${1:?usage: bench/run_device.sh BUILD_DIR}
OUT=${OUT:-/tmp/pagoda-bench-out}
BUDGET_S=${BUDGET_S:-540}
MODEL_DIR=${MODEL_DIR:-/tmp/pagoda-llama3-8b}
DEVICE=${DEVICE:-cuda}
PAGODA="$BUILD/pagoda"
W=$(mktemp -d /tmp/pagoda-bench-work.XXXXXX)
LOG="$OUT/run_device.log"
PORT=8765
T0=$(date +%s)
mkdir -p "$OUT"
exec > >(tee -a "$LOG") 2>&1

COMMANDS=()
STEPS=()  # "name: outcome" of every step, for the report
REDUCTIONS=("W1: 3 timed iterations after 1 warm-up" "W2: 200 requests of 1024/1024 (not 1000); 1000 of 128/128"
            "W3: 20 requests at 1 req/s, 100 requests at 4, 16, 64 req/s and unbounded (not 500)"
            "W4: 100 requests (not 200)" "HF baseline: 2 timed repetitions; static batches 32 x 128/128, 8 x 1024/256")

elapsed() { echo $(($(date +%s) - T0)); }
note() { echo "[$(elapsed)s] $*"; }
# run_step NAME TIMEOUT_S CMD...: runs CMD (recorded in the report) unless the budget is spent.
run_step() {
  local name=$1 limit=$2
  shift 2
  if (($(elapsed) + 20 > BUDGET_S)); then
    note "skip $name: time budget spent"
    STEPS+=("$name: skipped (time budget spent)")
    return 1
  fi
  local left=$((BUDGET_S - $(elapsed)))
  ((limit > left)) && limit=$left
  note "$name: $*"
  COMMANDS+=("$*")
  local t=$(elapsed)
  timeout --signal=INT --kill-after=10 "$limit" "$@"
  local rc=$?
  if ((rc == 0)); then
    STEPS+=("$name: ok ($(($(elapsed) - t)) s)")
  elif ((rc == 124)); then
    STEPS+=("$name: timed out after $limit s")
  else
    STEPS+=("$name: failed (exit code $rc)")
  fi
  ((rc != 0)) && note "$name: exit code $rc"
  return $rc
}

json_meta() {
  python3 - "$W/meta.json" "$@" <<'EOF'
import json, sys
path, status, commit, gpu, elapsed, model = sys.argv[1:7]
cmds, reds, steps = (a.split("\x1f") for a in sys.argv[7:10])
json.dump({"date": __import__("datetime").date.today().isoformat(), "commit": commit, "gpu": gpu,
           "elapsed_s": int(elapsed), "model": model, "pagoda_status": status, "commands": [c for c in cmds if c],
           "reductions": reds, "steps": [x for x in steps if x], "script": "bench/run_device.sh"},
          open(path, "w"), indent=2)
EOF
}

wait_health() {  # wait_health PID SECONDS: 0 once /health answers 200
  local pid=$1 limit=$2 start
  start=$(date +%s.%N)
  while (($(date +%s) - ${start%.*} < limit)); do
    kill -0 "$pid" 2>/dev/null || return 1
    if python3 -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=1).status == 200 else 1)" 2>/dev/null; then
      python3 -c "import time; print(round(time.time() - $start, 3))" >"$W/startup_s"
      return 0
    fi
    sleep 0.1
  done
  return 1
}

start_server() {  # start_server EXTRA_FLAGS...: starts pagoda serve, waits for /health
  COMMANDS+=("$PAGODA serve $MODEL_DIR --port $PORT --device $DEVICE $*")
  "$PAGODA" serve "$MODEL_DIR" --port "$PORT" --device "$DEVICE" "$@" >"$W/server.log" 2>&1 &
  SERVER_PID=$!
  if ! wait_health "$SERVER_PID" 180; then
    STEPS+=("serve $*: did not answer /health")
    note "pagoda serve did not become healthy; its log:"
    tail -20 "$W/server.log"
    stop_server
    return 1
  fi
}

stop_server() {
  [ -n "${SERVER_PID:-}" ] || return 0
  kill -INT "$SERVER_PID" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$SERVER_PID" 2>/dev/null
  wait "$SERVER_PID" 2>/dev/null
  SERVER_PID=""
}

prefix_cache_rate() {  # hits/queries from /metrics, as "hits queries"
  python3 - "$PORT" <<'EOF'
import re, sys, urllib.request
text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode()
def total(name):
    return sum(float(m.group(1)) for m in re.finditer(r"^pagoda:%s(?:_total)?(?:\{[^}]*\})? ([0-9.eE+-]+)$" % name, text, re.M))
print(total("prefix_cache_hits"), total("prefix_cache_queries"))
EOF
}

# ---- setup -------------------------------------------------------------------
# cuBLASLt is linked dynamically: use the device's CUDA libraries.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
export LD_LIBRARY_PATH
if [ -x "$PAGODA" ] && ldd "$PAGODA" | grep -q "not found"; then
  note "unresolved libraries of $PAGODA:"
  ldd "$PAGODA" | grep "not found"
fi
note "device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null)"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
GPU_SLUG=$(echo "${GPU:-gpu}" | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')
if [ -n "${PAGODA_COMMIT:-}" ]; then
  COMMIT=$PAGODA_COMMIT
elif COMMIT=$(git rev-parse HEAD 2>/dev/null); then
  git diff --quiet HEAD 2>/dev/null || COMMIT="$COMMIT (+ uncommitted changes)"
else
  COMMIT=unknown
fi
TOK=${PAGODA_TOKENIZER_DIR:-../shared/models/tokenizers/llama3_1}
[ -f "$TOK/tokenizer.json" ] || TOK=.devcarry/tokenizers/llama3_1

if [ -f "$MODEL_DIR/config.json" ] && ls "$MODEL_DIR"/*.safetensors >/dev/null 2>&1; then
  note "reusing $MODEL_DIR"
else
  run_step model 240 python3 tools/make_random_model.py --preset llama3-8b --out "$MODEL_DIR" --tokenizer "$TOK" ||
    { note "cannot create the model"; }
fi
cp "$MODEL_DIR/config.json" "$W/config.json" 2>/dev/null
run_step ceilings 60 python3 bench/torch_ceilings.py --json "$W/ceilings.json"
GBPS=$(python3 -c "import json; print(json.load(open('$W/ceilings.json'))['d2d_copy_gbps'])" 2>/dev/null || echo 0)
TFLOPS=$(python3 -c "import json; print(json.load(open('$W/ceilings.json'))['bf16_matmul_tflops'])" 2>/dev/null || echo 0)

# ---- HF transformers baseline (first: it is fixed-size, about 70 s for the 8B) ----
run_step HF 240 python3 bench/hf_baseline.py --model "$MODEL_DIR" --json "$W/hf.json"

# ---- pagoda (most informative first: a step that would end past the budget is cut)
if [ ! -x "$PAGODA" ]; then
  STATUS="not run: no pagoda executable in $BUILD"
elif ! "$PAGODA" bench latency --help 2>/dev/null | grep -q -- --ceiling-gbps; then
  STATUS="not run: this build has no engine (pagoda bench latency unavailable)"
else
  STATUS="run"
fi
note "pagoda: $STATUS"

if [ "$STATUS" = run ]; then
  CEIL=(--ceiling-gbps "$GBPS" --ceiling-tflops "$TFLOPS")
  run_step W1 90 "$PAGODA" bench latency "$MODEL_DIR" --device "$DEVICE" --input-len 1024 --output-len 256 \
    --batch-size 1 --num-iters 3 --warmup 1 "${CEIL[@]}" --result-json "$W/pagoda_w1.json"
  run_step W6 60 "$PAGODA" bench latency "$MODEL_DIR" --device "$DEVICE" --input-len 8192 --output-len 1 \
    --batch-size 1 --num-iters 2 --warmup 1 "${CEIL[@]}" --result-json "$W/pagoda_w6.json"
  if (($(elapsed) + 60 < BUDGET_S)) && start_server; then
    echo "{\"startup_s\": $(cat "$W/startup_s")}" >"$W/pagoda_w5.json"
    note "W5: startup $(cat "$W/startup_s") s"
    SERVE=("$PAGODA" bench serve --base-url "http://127.0.0.1:$PORT" --no-progress --ready-check-timeout-sec 30)
    nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 200 >"$W/util.txt" 2>/dev/null &
    SMI_PID=$!
    run_step W3-1 40 "${SERVE[@]}" --dataset sharegpt --num-prompts 20 --request-rate 1 \
      --result-json "$W/pagoda_w3_r1.json"
    PLOTS=()  # the plots need gnuplot, which the device image may lack
    if command -v gnuplot >/dev/null; then PLOTS=(--plots "$W/w3_plots"); else note "W3: no gnuplot, no plots"; fi
    run_step W3 150 "${SERVE[@]}" --dataset sharegpt --num-prompts 100 --sweep-rates 4,16,64,inf \
      "${PLOTS[@]}" --result-json "$W/pagoda_w3.json"
    kill "$SMI_PID" 2>/dev/null
    # W3 saturated: GPU busy over one unbounded-rate run alone (the figure
    # above includes 1-16 req/s, where the GPU idles between arrivals).
    nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 >"$W/util_sat.txt" 2>/dev/null &
    SMI_PID=$!
    run_step W3-sat 60 "${SERVE[@]}" --dataset sharegpt --num-prompts 200 --request-rate inf \
      --result-json "$W/pagoda_w3_sat.json"
    kill "$SMI_PID" 2>/dev/null
    python3 -c "
import json
def mean(f):
    v = [float(x) for x in open(f) if x.strip()]
    return sum(v) / len(v) if v else None
json.dump({'all': mean('$W/util.txt'), 'saturated': mean('$W/util_sat.txt')}, open('$W/gpu_util.json', 'w'))" 2>/dev/null
    read -r H0 Q0 < <(prefix_cache_rate 2>/dev/null || echo "0 0")
    run_step W4-on 60 "${SERVE[@]}" --dataset prefix --prefix-len 2048 --input-len 128 --output-len 128 \
      --num-prompts 100 --result-json "$W/pagoda_w4_on.json"
    read -r H1 Q1 < <(prefix_cache_rate 2>/dev/null || echo "0 0")
    stop_server
    if (($(elapsed) + 60 < BUDGET_S)) && start_server --no-enable-prefix-caching; then
      run_step W4-off 60 "${SERVE[@]}" --dataset prefix --prefix-len 2048 --input-len 128 --output-len 128 \
        --num-prompts 100 --result-json "$W/pagoda_w4_off.json"
      stop_server
    fi
    python3 -c "
import json; q=$Q1-$Q0; json.dump({'on': ($H1-$H0)/q if q > 0 else None, 'off': 0.0}, open('$W/w4_hits.json','w'))"
  fi
  run_step W2b 60 "$PAGODA" bench throughput "$MODEL_DIR" --device "$DEVICE" --num-prompts 1000 --input-len 128 \
    --output-len 128 --result-json "$W/pagoda_w2_128.json"
  run_step W2a 120 "$PAGODA" bench throughput "$MODEL_DIR" --device "$DEVICE" --num-prompts 200 --input-len 1024 \
    --output-len 1024 --result-json "$W/pagoda_w2_1024.json"
fi

# ---- report ------------------------------------------------------------------------
DATE=$(date +%Y-%m-%d)
BASE="bench/results/$DATE-$GPU_SLUG"
n=2
while [ -e "$BASE.md" ]; do BASE="bench/results/$DATE-$GPU_SLUG-$n"; n=$((n + 1)); done
mkdir -p bench/results
json_meta "$STATUS" "$COMMIT" "$GPU" "$(elapsed)" "Llama-3.1-8B shape ($MODEL_DIR)" \
  "$(IFS=$'\x1f'; echo "${COMMANDS[*]}")" "$(IFS=$'\x1f'; echo "${REDUCTIONS[*]}")" \
  "$(IFS=$'\x1f'; echo "${STEPS[*]}")"
python3 bench/device_report.py "$W" "$BASE" >/dev/null && note "report: $BASE.md"
cp "$BASE.md" "$BASE.json" "$OUT/" 2>/dev/null
for f in latency_cdf sweep_throughput sweep_latency; do
  [ -f "$W/w3_plots/$f.png" ] && cp "$W/w3_plots/$f.png" "$OUT/w3_$f.png"
done
note "done"
