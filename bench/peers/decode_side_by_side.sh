#!/usr/bin/env bash
# Batch-1 decode, pagoda beside llama.cpp on the same GGUF files in one device call:
#   OUT=<dir> bench/peers/decode_side_by_side.sh PAGODA_BINARY LLAMA_CPP_BIN_DIR GGUF...
# For each file, alternating the engines ROUNDS times (default 2, so that clock or host drift
# shows up as a spread rather than as a bias):
#   pagoda:    bench latency FILE --device cuda --input-len $DEPTH --output-len $GEN --batch-size 1
#              (TPOT: the mean time per output token after the first)
#   llama.cpp: llama-bench -m FILE -ngl 99 -fa 1 -p 0 -n $GEN -d $DEPTH -r 3 -o json
#              (tg at depth DEPTH: generation tokens per second with a DEPTH-token context)
# Both engines decode one sequence after a DEPTH-token prompt; llama-bench's figure excludes the
# prompt, as TPOT does. DEPTH defaults to 1024 and GEN to 128 (the W1 shape of bench/README.md).
# PAGODA_FLAGS are added to pagoda's runs. Writes $OUT/side_by_side.md and each run's log/JSON.
set -u
pagoda=${1:?usage: decode_side_by_side.sh PAGODA_BINARY LLAMA_CPP_BIN_DIR GGUF...}
llama=${2:?usage: decode_side_by_side.sh PAGODA_BINARY LLAMA_CPP_BIN_DIR GGUF...}
shift 2
(($# > 0)) || { echo "decode_side_by_side.sh: no GGUF files" >&2; exit 2; }
out=${OUT:-/tmp/pagoda-peers-out}
depth=${DEPTH:-1024}
gen=${GEN:-128}
rounds=${ROUNDS:-2}
flags=${PAGODA_FLAGS:-}
mkdir -p "$out"
for f in "$@"; do
  name=$(basename "$f" .gguf)
  for r in $(seq 1 "$rounds"); do
    # shellcheck disable=SC2086  # flags is a word list
    timeout 300 "$pagoda" bench latency "$f" --device cuda $flags --input-len "$depth" --output-len "$gen" \
      --batch-size 1 --num-iters 3 --warmup 1 --result-json "$out/${name}_pagoda_$r.json" \
      >"$out/${name}_pagoda_$r.log" 2>&1 || echo "$name pagoda round $r failed (rc $?)"
    timeout 300 "$llama/llama-bench" -m "$f" -ngl 99 -fa 1 -p 0 -n "$gen" -d "$depth" -r 3 -o json \
      >"$out/${name}_llama_$r.json" 2>"$out/${name}_llama_$r.log" || echo "$name llama.cpp round $r failed (rc $?)"
  done
done
python3 - "$out" "$rounds" "$@" <<'PY' | tee "$out/side_by_side.md"
import json, os, statistics, sys
out, rounds, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
print("| file | pagoda TPOT ms (rounds) | llama.cpp ms/token (rounds) | pagoda tok/s | llama.cpp tok/s | pagoda / llama.cpp speed |")
print("|---|---|---|---|---|---|")
for f in files:
    name = os.path.basename(f)[:-5] if f.endswith(".gguf") else os.path.basename(f)
    p, l = [], []
    for r in range(1, rounds + 1):
        j = load(os.path.join(out, f"{name}_pagoda_{r}.json"))
        if j and "tpot_mean_ms" in j:
            p.append(j["tpot_mean_ms"])
        j = load(os.path.join(out, f"{name}_llama_{r}.json"))
        if j:
            tg = [t for t in j if t.get("n_gen", 0) > 0 and t.get("n_prompt", 0) == 0]
            if tg:
                l.append(1000.0 / tg[0]["avg_ts"])
    fmt = lambda xs: " / ".join(f"{x:.3f}" for x in xs) if xs else "failed"
    if p and l:
        mp, ml = statistics.median(p), statistics.median(l)
        print(f"| {name} | {fmt(p)} | {fmt(l)} | {1000 / mp:.1f} | {1000 / ml:.1f} | {ml / mp:.3f}x |")
    else:
        print(f"| {name} | {fmt(p)} | {fmt(l)} | | | |")
PY
