#!/usr/bin/env bash
# Installs what pagoda needs to build and test: Debian packages (apt-get) and
# the Python test packages into .venv. Idempotent; quick when all is present.
set -euo pipefail
cd "$(dirname "$0")/.."

debs=(build-essential cmake ninja-build pkg-config git clang libclang-rt-14-dev
      nlohmann-json3-dev libboost1.74-dev libpcre2-dev libsentencepiece-dev libxxhash-dev
      libfmt-dev libspdlog-dev libcli11-dev libgtest-dev libgmock-dev gnuplot-nox
      libcurl4-openssl-dev
      python3 python3-venv unzip curl)
missing=()
for p in "${debs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ "${1:-}" = "--python" ]; then
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  if ! .venv/bin/python -c "import pytest, tokenizers, jinja2, openai, gguf, sentencepiece, prometheus_client, huggingface_hub, jsonschema" 2>/dev/null; then
    .venv/bin/pip install -q --disable-pip-version-check -r requirements-test.txt
  fi
fi
