#!/usr/bin/env bash
# Runs libFuzzer targets for longer than CI does, keeping a corpus and a
# cumulative log per target, and prints executions and coverage.
# Usage: tests/fuzz/run_long.sh [SECONDS] [TARGET...]   (default: 3600 s, request_fuzzer)
# Needs the sanitizer build of scripts/test.sh (build-san). Env: FUZZ_DIR (default
# build-san/fuzz-long): corpus/<target>/ grows across runs; <target>.log gets one
# line per run: date, seconds, executions, coverage (edges), features, corpus size.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-3600}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(request_fuzzer)
dir=${FUZZ_DIR:-build-san/fuzz-long}
for t in "${targets[@]}"; do
  bin=$(find build-san -type f -name "$t" -perm -u+x | head -1)
  [ -n "$bin" ] || { echo "run_long: no $t under build-san (run scripts/test.sh first)" >&2; exit 2; }
  mkdir -p "$dir/corpus/$t"
  case $t in  # the seed corpora named in the targets' CMakeLists.txt
    request_fuzzer) seeds=tests/data/server/fuzz_seeds ;;
    tokenizer_fuzzer) seeds=tests/data/tokenizer/fuzz_seeds ;;
    gguf_fuzzer | safetensors_fuzzer) seeds=tests/data/io ;;
    jinja_fuzzer) seeds=../shared/models/tokenizers/chat-templates ;;
    *) seeds= ;;
  esac
  log="$dir/$t.run.log"
  "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    "$dir/corpus/$t" $seeds >"$log" 2>&1 || { tail -50 "$log"; exit 1; }
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corpus=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
  echo "$(date -u +%FT%TZ) seconds=$seconds execs=$execs cov=$cov ft=$ft corpus=$corpus" | tee -a "$dir/$t.log"
  awk -v t="$t" '{for(i=1;i<=NF;i++){split($i,kv,"="); s[kv[1]]+=kv[2]}} END {printf "%s cumulative: %d s, %d executions over %d runs\n", t, s["seconds"], s["execs"], NR}' "$dir/$t.log"
done
