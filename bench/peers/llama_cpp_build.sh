#!/usr/bin/env bash
# Builds llama.cpp (the peer for side-by-side benchmarks) from the source vendored in the
# llama-cpp-python sdist on PyPI, for one GPU architecture, into a folder that can be carried to the
# device machine. Nothing of it is committed: the source and build live under $WORK.
#   bench/peers/llama_cpp_build.sh [WORK_DIR] [OUT_DIR]
# WORK_DIR (default /tmp/pagoda-peers) holds the sdist and the build; OUT_DIR (default
# WORK_DIR/llama.cpp-bin) receives llama-bench, llama-server, llama-cli and llama-quantize, statically linked
# against ggml (CUDA runtime and cuBLAS stay shared: they are on the device).
# Env: LLAMA_CPP_PYTHON_VERSION (default 0.3.36, vendoring llama.cpp 0c1e570), CUDA_ARCH (90-real:
# llama.cpp uses no sm_90a-only instructions), JOBS (default: all cores), CUDA_HOME (/usr/local/cuda).
# The build records its flags in OUT_DIR/BUILD_INFO; on 2 cores it takes about an hour, on 16 a few
# minutes.
set -euo pipefail
work=${1:-/tmp/pagoda-peers}
out=${2:-$work/llama.cpp-bin}
version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
arch=${CUDA_ARCH:-90-real}
jobs=${JOBS:-$(nproc)}
cuda=${CUDA_HOME:-/usr/local/cuda}
python=${PYTHON:-python3}
mkdir -p "$work"
sdist=$work/llama_cpp_python-$version.tar.gz
if [[ ! -f $sdist ]]; then
  "$python" -m pip download --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$work"
fi
src=$work/llama_cpp_python-$version/vendor/llama.cpp
[[ -d $src ]] || tar -C "$work" -xzf "$sdist"
flags=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$arch" -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=Release
  "-DCMAKE_CUDA_COMPILER=$cuda/bin/nvcc")
cmake -S "$src" -B "$work/build" -G Ninja "${flags[@]}" > "$work/configure.log"
ninja -C "$work/build" -j "$jobs" llama-bench llama-server llama-cli llama-quantize
mkdir -p "$out"
cp "$work"/build/bin/{llama-bench,llama-server,llama-cli,llama-quantize} "$out"/
{
  echo "llama-cpp-python $version sdist, vendored llama.cpp"
  echo "cmake ${flags[*]}"
} > "$out/BUILD_INFO"
echo "llama.cpp binaries in $out"
