#!/usr/bin/env bash
# A/B of pagoda builds or flags in one device call (same host, same model):
# each row runs W1 (batch-1 latency, 1024 in / 256 out), W2 1k/1k (200
# requests), W2 128/128 (1000 requests) and W3 saturated (200 ShareGPT-like
# requests at an unbounded rate against `pagoda serve`; GPU busy sampled by
# nvidia-smi every 100 ms; host us per engine step from /metrics).
#   OUT=<dir> bash bench/ab.sh MODEL_DIR 'NAME|PAGODA_BINARY|FLAGS' ...
# e.g. the async-scheduling A/B:
#   bench/ab.sh /tmp/m 'on|build/pagoda|' 'off|build/pagoda|--no-async-scheduling'
# or a before/after of two builds: bench/ab.sh /tmp/m 'before|old/pagoda|' 'after|new/pagoda|'.
# ROUNDS=N (default 1) repeats the rows in turn (A B A B ...), so drift on the
# host shows. Writes $OUT/ab.md (one table row per run) and the raw JSON and
# logs beside it. WORKLOADS (default "w1 w2a w2b w3") picks the columns run.
set -u
model=${1:?usage: ab.sh MODEL_DIR 'NAME|PAGODA_BINARY|FLAGS' ...}
shift
(($# > 0)) || { echo "ab.sh: no rows" >&2; exit 2; }
out=${OUT:-/tmp/pagoda-ab-out}
rounds=${ROUNDS:-1}
workloads=" ${WORKLOADS:-w1 w2a w2b w3} "
port=8766
mkdir -p "$out"

wait_health() {  # wait_health PID SECONDS
  for _ in $(seq $(($2 * 5))); do
    kill -0 "$1" 2>/dev/null || return 1
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=1)" \
      2>/dev/null && return 0
    sleep 0.2
  done
  return 1
}

has() { [[ $workloads == *" $1 "* ]]; }

run_row() {  # run_row NAME BINARY TAG FLAGS...
  local name=$1 pagoda=$2 tag=$3
  shift 3
  echo "[$(date +%T)] $name ($tag): $pagoda $*"
  has w1 && timeout 120 "$pagoda" bench latency "$model" --device cuda --input-len 1024 --output-len 256 \
    --batch-size 1 --num-iters 3 --warmup 1 "$@" --result-json "$out/w1_$tag.json" >"$out/w1_$tag.log" 2>&1
  has w2a && timeout 150 "$pagoda" bench throughput "$model" --device cuda --num-prompts 200 --input-len 1024 \
    --output-len 1024 "$@" --result-json "$out/w2a_$tag.json" >"$out/w2a_$tag.log" 2>&1
  has w2b && timeout 120 "$pagoda" bench throughput "$model" --device cuda --num-prompts 1000 --input-len 128 \
    --output-len 128 "$@" --result-json "$out/w2b_$tag.json" >"$out/w2b_$tag.log" 2>&1
  if has w3; then
    "$pagoda" serve "$model" --port "$port" --device cuda "$@" >"$out/serve_$tag.log" 2>&1 &
    local pid=$!
    if wait_health "$pid" 120; then
      python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$port/metrics').read().decode())" \
        >"$out/metrics0_$tag.txt" 2>/dev/null
      nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 >"$out/util_$tag.txt" 2>/dev/null &
      local smi=$!
      timeout 120 "$pagoda" bench serve --base-url "http://127.0.0.1:$port" --no-progress --dataset sharegpt \
        --num-prompts 200 --request-rate inf --result-json "$out/w3_$tag.json" >"$out/w3_$tag.log" 2>&1
      kill "$smi" 2>/dev/null
      python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$port/metrics').read().decode())" \
        >"$out/metrics1_$tag.txt" 2>/dev/null
    fi
    kill -INT "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  python3 - "$out" "$tag" "$name" <<'PY' >>"$out/ab.md"
import json, os, re, sys
out, tag, name = sys.argv[1:]
def path(f):
    return os.path.join(out, f)
def load(f):
    try:
        return json.load(open(path(f)))
    except Exception:
        return {}
def metrics(f):  # name -> value of each sample in a Prometheus text file (labels dropped)
    try:
        text = open(path(f)).read()
    except OSError:
        return {}
    return {k: float(v) for k, v in re.findall(r"^([a-zA-Z_:]+)(?:\{[^}]*\})? ([0-9.eE+-]+)$", text, re.M)}
def fmt(v, spec):
    return "n/a" if v is None else format(v, spec)
w1, w2a, w2b, w3 = (load(f"{w}_{tag}.json") for w in ("w1", "w2a", "w2b", "w3"))
util = [float(x) for x in open(path(f"util_{tag}.txt")) if x.strip()] if os.path.exists(path(f"util_{tag}.txt")) else []
busy = sum(util) / len(util) if util else None
m0, m1 = metrics(f"metrics0_{tag}.txt"), metrics(f"metrics1_{tag}.txt")
def delta(k):
    return m1[k] - m0.get(k, 0.0) if k in m1 else None
steps, secs, wait = (delta("pagoda:engine_" + k) for k in ("steps_total", "step_seconds_total",
                                                           "step_device_wait_seconds_total"))
host_us = (secs - wait) / steps * 1e6 if steps and secs is not None and wait is not None else None
print(f"| {name} | {fmt(w1.get('tpot_mean_ms'), '.3f')} | {fmt(w1.get('host_us_per_step'), '.0f')} | "
      f"{fmt(w2a.get('output_tok_s'), '.0f')} | {fmt(w2a.get('host_us_per_step'), '.0f')} | "
      f"{fmt(w2b.get('output_tok_s'), '.0f')} | {fmt(w2b.get('host_us_per_step'), '.0f')} | "
      f"{fmt(w3.get('output_throughput'), '.0f')} | {fmt(host_us, '.0f')} | {fmt(busy, '.1f')} |")
PY
}

{
  echo "| row | W1 TPOT ms | W1 host us/step | W2 1k/1k out tok/s | W2 1k/1k host us/step |" \
    "W2 128/128 out tok/s | W2 128/128 host us/step | W3 sat out tok/s | W3 sat host us/step | W3 sat GPU busy % |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
} >"$out/ab.md"
for ((r = 1; r <= rounds; r++)); do
  for row in "$@"; do
    IFS='|' read -r name binary flags <<<"$row"
    # shellcheck disable=SC2086  # FLAGS is a word list
    run_row "$name" "$binary" "${name// /_}_r$r" $flags
  done
done
cat "$out/ab.md"
