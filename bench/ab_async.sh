#!/usr/bin/env bash
# A/B of async scheduling in one device call: the same build and model run
# W1 (batch-1 latency), W2 128/128 (1000 requests) and W3 saturated (200
# ShareGPT-like requests at an unbounded rate, GPU busy sampled by nvidia-smi
# every 100 ms) with the default (async on) and with --no-async-scheduling.
#   OUT=<dir> bash bench/ab_async.sh BUILD_DIR MODEL_DIR
# Writes $OUT/ab_async.md (one row per setting) and the raw JSON beside it.
set -u
build=$(cd "${1:?usage: ab_async.sh BUILD_DIR MODEL_DIR}" && pwd) || exit 2
model=${2:?usage: ab_async.sh BUILD_DIR MODEL_DIR}
out=${OUT:-/tmp/pagoda-ab-out}
pagoda=$build/pagoda
port=8766
mkdir -p "$out"

wait_health() {  # wait_health PID SECONDS
  for _ in $(seq $(($2 * 5))); do
    kill -0 "$1" 2>/dev/null || return 1
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
    python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=1)" \
      2>/dev/null && return 0
    sleep 0.2
  done
  return 1
}

row() {  # row NAME FLAGS...
  local name=$1
  shift
  local tag=${name// /_}
  timeout 90 "$pagoda" bench latency "$model" --device cuda --input-len 1024 --output-len 256 --batch-size 1 \
    --num-iters 3 --warmup 1 "$@" --result-json "$out/w1_$tag.json" >"$out/w1_$tag.log" 2>&1
  timeout 90 "$pagoda" bench throughput "$model" --device cuda --num-prompts 1000 --input-len 128 \
    --output-len 128 "$@" --result-json "$out/w2_$tag.json" >"$out/w2_$tag.log" 2>&1
  "$pagoda" serve "$model" --port "$port" --device cuda "$@" >"$out/serve_$tag.log" 2>&1 &
  local pid=$!
  if wait_health "$pid" 120; then
    nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 >"$out/util_$tag.txt" 2>/dev/null &
    local smi=$!
    timeout 90 "$pagoda" bench serve --base-url "http://127.0.0.1:$port" --no-progress --dataset sharegpt \
      --num-prompts 200 --request-rate inf --result-json "$out/w3_$tag.json" >"$out/w3_$tag.log" 2>&1
    kill "$smi" 2>/dev/null
    curl -s "http://127.0.0.1:$port/metrics" >"$out/metrics_$tag.txt" 2>/dev/null
  fi
  kill -INT "$pid" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  python3 - "$out" "$tag" "$name" <<'EOF' >>"$out/ab_async.md"
import json, os, sys
out, tag, name = sys.argv[1:]
def load(f):
    try:
        return json.load(open(os.path.join(out, f)))
    except Exception:
        return {}
def get(d, *keys):
    for k in keys:
        if k in d and d[k] is not None:
            return d[k]
    return None
def fmt(v, spec):
    return "n/a" if v is None else format(v, spec)
w1, w2, w3 = load(f"w1_{tag}.json"), load(f"w2_{tag}.json"), load(f"w3_{tag}.json")
util = [float(x) for x in open(os.path.join(out, f"util_{tag}.txt")) if x.strip()] \
    if os.path.exists(os.path.join(out, f"util_{tag}.txt")) else []
busy = sum(util) / len(util) if util else None
print(f"| {name} | {fmt(get(w1, 'tpot_mean_ms'), '.2f')} | "
      f"{fmt(get(w2, 'output_tok_s'), '.0f')} | "
      f"{fmt(get(w2, 'host_us_per_step'), '.0f')} | {fmt(get(w2, 'num_overlapped_steps'), 'd')} | "
      f"{fmt(get(w3, 'output_throughput'), '.0f')} | {fmt(busy, '.1f')} |")
EOF
}

{
  echo "| async scheduling | W1 TPOT ms | W2 128/128 out tok/s | W2 host us/step | W2 overlapped steps | W3 sat out tok/s | W3 sat GPU busy % |"
  echo "|---|---|---|---|---|---|---|"
} >"$out/ab_async.md"
row "on"
row "off" --no-async-scheduling
cat "$out/ab_async.md"
