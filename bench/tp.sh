#!/usr/bin/env bash
# Tensor parallelism on one machine with several GPUs, in one device call:
#   OUT=<dir> bash bench/tp.sh PAGODA_BINARY MODEL TP_SIZE...   e.g. bench/tp.sh build/pagoda /tmp/m 1 2 4
# For each TP size (the first one is the baseline, normally 1):
#   - greedy outputs of 16 prompts (`pagoda generate --input`, 64 tokens, logprobs) compared with the
#     baseline's: tokens identical until the first difference, and the largest |logprob difference|
#     of the chosen tokens before it, and at each first difference the gap between the logprob of the
#     baseline's token (under the baseline) and of this run's token (under this run): a small gap is a
#     near-tie that bf16 sums in another order may flip;
#   - W1: `bench latency` 1024 in / 256 out, batch 1 (TPOT);
#   - W2: `bench throughput` 1k/1k, $W2_PROMPTS prompts (default 200).
# PAGODA_FLAGS adds flags to every run (e.g. "--load-format dummy" for a config-only folder);
# WORKLOADS (default "greedy w1 w2") picks what runs. Writes $OUT/tp.md and the logs beside it.
set -u
pagoda=${1:?usage: bench/tp.sh PAGODA_BINARY MODEL TP_SIZE...}
model=${2:?usage: bench/tp.sh PAGODA_BINARY MODEL TP_SIZE...}
shift 2
(($# > 0)) || { echo "tp.sh: no TP sizes" >&2; exit 2; }
out=${OUT:-/tmp/pagoda-tp-out}
flags=${PAGODA_FLAGS:-}
workloads=" ${WORKLOADS:-greedy w1 w2} "
w2_prompts=${W2_PROMPTS:-200}
mkdir -p "$out"
has() { [[ $workloads == *" $1 "* ]]; }

python3 - "$out/prompts.jsonl" <<'PY'
import json, sys
topics = ["the history of the printing press", "how a refrigerator works", "a recipe for bread",
          "the rules of chess", "why the sky is blue", "a short poem about rain", "the causes of inflation",
          "how vaccines train the immune system", "the life of a honeybee", "what a compiler does",
          "a travel guide to Kyoto", "the physics of a bicycle", "the plot of Hamlet",
          "how to learn a language", "the water cycle", "the invention of the telephone"]
with open(sys.argv[1], "w") as f:
    for t in topics:
        f.write(json.dumps({"prompt": f"Write a few sentences about {t}.", "max_tokens": 64,
                            "temperature": 0, "logprobs": 1, "ignore_eos": True}) + "\n")
PY

for tp in "$@"; do
  echo "[$(date +%T)] tp=$tp"
  # shellcheck disable=SC2086  # flags is a word list
  has greedy && timeout 240 "$pagoda" generate "$model" --device cuda --tensor-parallel-size "$tp" $flags \
    --input "$out/prompts.jsonl" --output "$out/greedy_tp$tp.jsonl" >"$out/greedy_tp$tp.log" 2>&1
  # shellcheck disable=SC2086
  has w1 && timeout 240 "$pagoda" bench latency "$model" --device cuda --tensor-parallel-size "$tp" $flags \
    --input-len 1024 --output-len 256 --batch-size 1 --num-iters 3 --warmup 1 \
    --result-json "$out/w1_tp$tp.json" >"$out/w1_tp$tp.log" 2>&1
  # shellcheck disable=SC2086
  has w2 && timeout 300 "$pagoda" bench throughput "$model" --device cuda --tensor-parallel-size "$tp" $flags \
    --num-prompts "$w2_prompts" --input-len 1024 --output-len 1024 \
    --result-json "$out/w2_tp$tp.json" >"$out/w2_tp$tp.log" 2>&1
  grep -E "error|Error|tensor parallel" "$out"/*_tp$tp.log | head -5
done

python3 - "$out" "$@" <<'PY' | tee "$out/tp.md"
import json, os, sys
out, sizes = sys.argv[1], sys.argv[2:]
def load(f):
    try:
        return json.load(open(os.path.join(out, f)))
    except Exception:
        return {}
def lines(f):
    try:
        return [json.loads(l) for l in open(os.path.join(out, f)) if l.strip()]
    except Exception:
        return []
def fmt(v, spec):
    return "n/a" if v is None else format(v, spec)
base = sizes[0]
b1, b2, bg = load(f"w1_tp{base}.json"), load(f"w2_tp{base}.json"), lines(f"greedy_tp{base}.jsonl")
print(f"| TP | W1 TPOT ms | W1 vs TP={base} | W2 1k/1k out tok/s | W2 vs TP={base} | greedy: same tokens | first difference | max abs logprob diff before it | largest gap at a flip |")
print("|---|---|---|---|---|---|---|---|---|")
for tp in sizes:
    w1, w2, g = load(f"w1_tp{tp}.json"), load(f"w2_tp{tp}.json"), lines(f"greedy_tp{tp}.jsonl")
    t1, t2 = w1.get("tpot_mean_ms"), w2.get("output_tok_s")
    r1 = t1 / b1["tpot_mean_ms"] if t1 and b1.get("tpot_mean_ms") else None
    r2 = t2 / b2["output_tok_s"] if t2 and b2.get("output_tok_s") else None
    same = total = 0
    first, flips, worst = [], [], 0.0
    for a, b in zip(bg, g):
        ta, tb = a.get("token_ids", []), b.get("token_ids", [])
        la = [x.get("logprob") for x in a.get("logprobs") or []]
        lb = [x.get("logprob") for x in b.get("logprobs") or []]
        n = 0
        while n < min(len(ta), len(tb)) and ta[n] == tb[n]:
            n += 1
        same += n
        total += len(ta)
        if n < len(ta):
            first.append(n)
            if n < min(len(la), len(lb)) and la[n] is not None and lb[n] is not None:
                flips.append(abs(la[n] - lb[n]))
        for x, y in zip(la[:n], lb[:n]):
            if x is not None and y is not None:
                worst = max(worst, abs(x - y))
    greedy = f"{same}/{total}" if g else "n/a"
    fd = "none" if g and not first else (f"{len(first)} prompts, earliest at token {min(first)}" if first else "n/a")
    flip = fmt(max(flips), '.4f') if flips else ("none" if g else "n/a")
    print(f"| {tp} | {fmt(t1, '.3f')} | {fmt(r1, '.3f')} | {fmt(t2, '.0f')} | {fmt(r2, '.3f')} | {greedy} | {fd} | {fmt(worst if g else None, '.4f')} | {flip} |")
PY
