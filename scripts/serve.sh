#!/usr/bin/env bash
# Builds pagoda and serves a model with the OpenAI-compatible API.
# Usage: scripts/serve.sh [MODEL] [pagoda serve flags...]
# Without MODEL it serves SmolLM2-135M-Instruct, fetched on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
[ -x /usr/local/cuda/bin/nvcc ] && export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPAGODA_TESTS=OFF >/dev/null
ninja -C build pagoda
if [ $# -eq 0 ] || [[ "$1" == -* ]]; then
  model=$(scripts/fetch_default_model.sh)
  exec build/pagoda serve "$model" "$@"
fi
exec build/pagoda serve "$@"
