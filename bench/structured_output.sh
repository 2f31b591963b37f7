#!/usr/bin/env bash
# Structured output's three goals (issue 17) in one device call, on the
# Llama-3.1-8B-shaped random model (tools/make_random_model.py):
#  1. mask overhead: `bench throughput` with 256 requests (128 in / 512 out,
#     batch 256) and `bench latency` at batch 1 (128 in / 256 out), each
#     constrained by bench/structured/nested_objects.json and unconstrained,
#     alternated ROUNDS times (default 2) so drift shows; batch 256 also
#     constrained with --no-jump-forward;
#  2. schema compile time over tests/data/structured/schemas through /v1
#     (bench/structured_compile_time.py against `pagoda serve`);
#  3. jump-forward: batch-1 output tok/s (1 / TPOT) with
#     bench/structured/long_fixed_keys.json against unconstrained.
#   OUT=<dir> bash bench/structured_output.sh PAGODA_BINARY [MODEL_DIR]
# MODEL_DIR defaults to /tmp/llama3-8b (created when absent; the tokenizer as
# in run_device.sh: PAGODA_TOKENIZER_DIR, ../shared or .devcarry). Writes
# $OUT/structured_output.md (the tables) and the raw JSON and logs beside it.
# Env: ROUNDS (2), PAGODA_FLAGS (added to every pagoda run, e.g. "--load-format
# dummy" with a MODEL_DIR from make_random_model.py --config-only).
set -u
pagoda=${1:?usage: structured_output.sh PAGODA_BINARY [MODEL_DIR]}
model=${2:-/tmp/llama3-8b}
out=${OUT:-/tmp/pagoda-so-out}
rounds=${ROUNDS:-2}
port=8767
here=$(cd "$(dirname "$0")" && pwd)
nested=$here/structured/nested_objects.json
long_keys=$here/structured/long_fixed_keys.json
mkdir -p "$out"

if [ ! -f "$model/config.json" ]; then
  tok=${PAGODA_TOKENIZER_DIR:-../shared/models/tokenizers/llama3_1}
  [ -f "$tok/tokenizer.json" ] || tok=.devcarry/tokenizers/llama3_1
  timeout 300 python3 tools/make_random_model.py --preset llama3-8b --out "$model" --tokenizer "$tok" \
    >"$out/model.log" 2>&1 || { echo "model creation failed (see $out/model.log)" >&2; exit 1; }
fi

run() {  # run TAG COMMAND...: runs a bench step with a timeout, logging it
  local tag=$1
  shift
  echo "[$(date +%T)] $tag: $* ${PAGODA_FLAGS:-}"
  # shellcheck disable=SC2086  # PAGODA_FLAGS is a list of flags
  timeout 300 "$@" ${PAGODA_FLAGS:-} --result-json "$out/$tag.json" >"$out/$tag.log" 2>&1 ||
    echo "  $tag failed (see $tag.log)"
}

for r in $(seq "$rounds"); do
  for variant in plain nested; do
    flags=()
    [ "$variant" = nested ] && flags=(--response-format-schema "$nested")
    run "b256_${variant}_$r" "$pagoda" bench throughput "$model" --device cuda --num-prompts 256 \
      --max-num-seqs 256 --input-len 128 --output-len 512 "${flags[@]}"
    run "b1_${variant}_$r" "$pagoda" bench latency "$model" --device cuda --batch-size 1 --input-len 128 \
      --output-len 256 --num-iters 3 --warmup 1 "${flags[@]}"
  done
  # The same batch-256 run without jump-forward: the masks' cost alone
  # (jump-forward changes the steps' shapes: multi-token chunks, dropped rows).
  run "b256_nested_nojf_$r" "$pagoda" bench throughput "$model" --device cuda --num-prompts 256 \
    --max-num-seqs 256 --input-len 128 --output-len 512 --response-format-schema "$nested" \
    --no-jump-forward
  run "jf_long_keys_$r" "$pagoda" bench latency "$model" --device cuda --batch-size 1 --input-len 128 \
    --output-len 256 --num-iters 3 --warmup 1 --response-format-schema "$long_keys"
done

# shellcheck disable=SC2086
"$pagoda" serve "$model" --device cuda --port "$port" --no-enable-prefix-caching ${PAGODA_FLAGS:-} \
  >"$out/serve.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=1)" \
    2>/dev/null && break
  sleep 0.2
done
timeout 300 python3 "$here/structured_compile_time.py" "http://127.0.0.1:$port" >"$out/compile.md" \
  2>"$out/compile.log" || echo "  compile-time step failed (see compile.log)"
kill -INT "$pid" 2>/dev/null
wait "$pid" 2>/dev/null

python3 - "$out" "$rounds" <<'PY' >"$out/structured_output.md"
import json, os, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def load(tag):
    try:
        return json.load(open(os.path.join(out, tag + ".json")))
    except (OSError, ValueError):
        return None
def step_ms(j):  # mean wall time per engine step over the run
    return j["elapsed_s"] / j["num_steps"] * 1e3 if j and j.get("num_steps") else None
def fmt(x, spec=".2f"):
    return "n/a" if x is None else format(x, spec)
def pct(a, b):
    return None if a is None or b is None else (a / b - 1) * 100
print("# Structured output (issue 17)\n")
print("## Mask overhead: nested-object schema against unconstrained, same call\n")
print("| round | batch | unconstrained ms/step | constrained ms/step | overhead % | output tok/s (plain / constrained) | mean output tokens (constrained) | goal |")
print("|---|---|---|---|---|---|---|---|")
for r in range(1, rounds + 1):
    p, n = load(f"b256_plain_{r}"), load(f"b256_nested_{r}")
    sp, sn = step_ms(p), step_ms(n)
    toks = None if not n else n["total_output_tokens"] / max(n["num_requests"], 1)
    print(f"| {r} | 256 | {fmt(sp)} | {fmt(sn)} | {fmt(pct(sn, sp), '.1f')} | "
          f"{fmt(p and p['output_tok_s'], '.0f')} / {fmt(n and n['output_tok_s'], '.0f')} | {fmt(toks, '.0f')} | ≤ 5 % |")
    nj = load(f"b256_nested_nojf_{r}")
    sj = step_ms(nj)
    print(f"| {r} | 256, no jump-forward | {fmt(sp)} | {fmt(sj)} | {fmt(pct(sj, sp), '.1f')} | "
          f"{fmt(p and p['output_tok_s'], '.0f')} / {fmt(nj and nj['output_tok_s'], '.0f')} | "
          f"{fmt(nj and nj['total_output_tokens'] / max(nj['num_requests'], 1), '.0f')} | ≤ 5 % |")
    p, n = load(f"b1_plain_{r}"), load(f"b1_nested_{r}")
    tp, tn = p and p.get("tpot_mean_ms"), n and n.get("tpot_mean_ms")
    print(f"| {r} | 1 | {fmt(tp)} (TPOT) | {fmt(tn)} (TPOT) | {fmt(pct(tn, tp), '.1f')} | "
          f"{fmt(tp and 1e3 / tp, '.0f')} / {fmt(tn and 1e3 / tn, '.0f')} | {fmt(n and n.get('min_output_tokens'), '')} (min) | ≤ 2 % |")
print("\nms/step = elapsed / engine steps (prefill steps included, the same in both runs). A constrained "
      "run whose outputs end before max_tokens (the JSON completed) shows fewer output tokens.\n")
print("## Jump-forward: batch-1 output tok/s on long fixed keys\n")
print("| round | unconstrained tok/s | long-keys tok/s | ratio | output tokens (min) | goal |")
print("|---|---|---|---|---|---|")
for r in range(1, rounds + 1):
    p, j = load(f"b1_plain_{r}"), load(f"jf_long_keys_{r}")
    tp, tj = p and p.get("tpot_mean_ms"), j and j.get("tpot_mean_ms")
    ratio = None if not tp or not tj else tp / tj
    print(f"| {r} | {fmt(tp and 1e3 / tp, '.0f')} | {fmt(tj and 1e3 / tj, '.0f')} | {fmt(ratio)} | "
          f"{fmt(j and j.get('min_output_tokens'), '')} | ≥ 1.5× |")
print()
try:
    print(open(os.path.join(out, "compile.md")).read())
except OSError:
    print("Compile time: not measured (see compile.log)")
PY
cat "$out/structured_output.md"
