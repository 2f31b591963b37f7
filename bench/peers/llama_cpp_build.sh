#!/usr/bin/env bash
# The llama.cpp peer for side-by-side benchmarks, from the source vendored in the llama-cpp-python
# sdist on PyPI. Nothing of it is committed. Two steps, because the device machine cannot download
# and this machine builds CUDA slowly:
#   bench/peers/llama_cpp_build.sh fetch WORK_DIR
#       (here) downloads the sdist into WORK_DIR and writes WORK_DIR/llama_src.tar.xz: its
#       llama.cpp without models, docs, tests, examples and the non-CUDA GPU backends (~7 MB, to
#       carry to the device);
#   bench/peers/llama_cpp_build.sh build SRC(.tar.xz or folder) OUT_DIR
#       (there, or here) configures and builds llama-bench and llama-quantize with CUDA for one
#       architecture into OUT_DIR (with ggml statically linked; CUDA runtime and cuBLAS shared), and
#       writes the flags to OUT_DIR/BUILD_INFO. On 32 cores a few minutes; on 2, hours.
# Env: LLAMA_CPP_PYTHON_VERSION (default 0.3.36, vendoring llama.cpp 0c1e570), CUDA_ARCH (90-real:
# llama.cpp uses no sm_90a-only instructions), JOBS (default: all cores), CUDA_HOME (/usr/local/cuda),
# PYTHON (python3, for pip).
set -euo pipefail
step=${1:?usage: llama_cpp_build.sh fetch WORK_DIR | build SRC OUT_DIR}
version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
case $step in
  fetch)
    work=${2:?usage: llama_cpp_build.sh fetch WORK_DIR}
    mkdir -p "$work"
    sdist=$work/llama_cpp_python-$version.tar.gz
    [[ -f $sdist ]] || "${PYTHON:-python3}" -m pip download --no-deps --no-binary :all: \
      "llama-cpp-python==$version" -d "$work"
    rm -rf "$work/llama_cpp_python-$version"
    tar -C "$work" -xzf "$sdist"
    src=$work/llama_cpp_python-$version/vendor/llama.cpp
    excluded=(models docs tests examples benches media gguf-py tools/ui tools/server/public
      ggml/src/ggml-vulkan ggml/src/ggml-sycl ggml/src/ggml-opencl ggml/src/ggml-cann
      ggml/src/ggml-metal ggml/src/ggml-musa ggml/src/ggml-webgpu ggml/src/ggml-zdnn
      ggml/src/ggml-hexagon)
    tar -C "$src" "${excluded[@]/#/--exclude=./}" -cf - . | xz -6 -T0 > "$work/llama_src.tar.xz"
    ls -la "$work/llama_src.tar.xz" ;;
  build)
    src=${2:?usage: llama_cpp_build.sh build SRC OUT_DIR}
    out=${3:?usage: llama_cpp_build.sh build SRC OUT_DIR}
    mkdir -p "$out"
    out=$(cd "$out" && pwd)
    if [[ -f $src ]]; then
      mkdir -p "$out/src"
      tar -C "$out/src" -xJf "$src"
      src=$out/src
    fi
    cuda=${CUDA_HOME:-/usr/local/cuda}
    flags=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-90-real}" -DGGML_NATIVE=OFF
      -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
      -DLLAMA_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_COMPILER=$cuda/bin/nvcc")
    cmake -S "$src" -B "$out/build" -G Ninja "${flags[@]}" > "$out/configure.log"
    ninja -C "$out/build" -j "${JOBS:-$(nproc)}" llama-bench llama-quantize > "$out/build.log"
    cp "$out"/build/bin/{llama-bench,llama-quantize} "$out"/
    printf 'llama-cpp-python %s sdist, vendored llama.cpp\ncmake %s\n' "$version" "${flags[*]}" \
      > "$out/BUILD_INFO"
    echo "llama.cpp binaries in $out" ;;
  *) echo "llama_cpp_build.sh: unknown step '$step' (fetch, build)" >&2; exit 2 ;;
esac
