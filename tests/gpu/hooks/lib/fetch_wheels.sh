#!/usr/bin/env bash
# Downloads the wheels tests/gpu/hooks/e2e.sh installs on the GPU machine for
# its OpenAI-SDK step (the device cannot reach PyPI), for that machine's
# Python (3.12, x86-64 manylinux; override with PYTHON_VERSION):
#   tests/gpu/hooks/lib/fetch_wheels.sh DEST   (e.g. DEST=.devcarry/wheels, carried there)
set -euo pipefail
dest=${1:?usage: fetch_wheels.sh DEST}
pip=${PIP:-pip}
[ -x "$(dirname "$0")/../../../../.venv/bin/pip" ] && pip=${PIP:-$(dirname "$0")/../../../../.venv/bin/pip}
mkdir -p "$dest"
"$pip" download -q -d "$dest" --only-binary=:all: --implementation cp \
  --python-version "${PYTHON_VERSION:-3.12}" \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  openai requests pytest jsonschema
echo "fetch_wheels: $(ls "$dest" | wc -l) wheels, $(du -sh "$dest" | cut -f1) in $dest"
