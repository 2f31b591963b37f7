#!/usr/bin/env bash
# Stages what tests/gpu/hooks/e2e.sh needs from a PAGODA_CUDA=ON build folder
# into a folder that can be carried to the GPU machine (run here, on the
# development machine):
#   tests/gpu/hooks/lib/stage_build.sh SRC_BUILD DEST   (e.g. DEST=.devcarry/build)
# Copies SRC_BUILD/pagoda to DEST/pagoda, the engine test binaries (if built:
# `ninja engine_tests engine_stress_test`; e2e.sh runs them with
# PAGODA_TEST_DEVICE=cuda) to DEST/tests/unit/engine/ (replacing what was
# there), and every shared library they load that the GPU machine's image may
# lack (all but glibc, libstdc++, libgcc and CUDA's: libfmt, libpcre2,
# libsentencepiece, libxxhash, libcurl, ...) to DEST/lib/, which e2e.sh puts on
# LD_LIBRARY_PATH. Fails when a binary has a library that cannot be found here.
set -euo pipefail
src=${1:?usage: stage_build.sh SRC_BUILD DEST}
dest=${2:?usage: stage_build.sh SRC_BUILD DEST}
[ -x "$src/pagoda" ] || { echo "stage_build: no $src/pagoda (ninja -C $src pagoda)" >&2; exit 1; }
mkdir -p "$dest/lib"
bins=("$src/pagoda")
cp "$src/pagoda" "$dest/pagoda"
rm -rf "$dest/tests/unit/engine"
engine=()
if [ -d "$src/tests/unit/engine" ]; then
  mkdir -p "$dest/tests/unit/engine"
  while IFS= read -r f; do
    cp "$f" "$dest/tests/unit/engine/"
    bins+=("$f")
    engine+=("$(basename "$f")")
  done < <(find "$src/tests/unit/engine" -maxdepth 1 -type f -executable | sort)
  if [ -x "$src/tests/unit/engine/engine_tests" ] && [ "$src/pagoda" -nt "$src/tests/unit/engine/engine_tests" ]; then
    echo "stage_build: warning: $src/tests/unit/engine/engine_tests is older than pagoda (ninja -C $src engine_tests engine_stress_test)" >&2
  fi
fi
# Also left to the GPU machine: OpenSSL and zlib (libcurl's), which every
# image with Python has, and which the Python processes that share this
# LD_LIBRARY_PATH (transformers, the OpenAI SDK) must not get in another version.
system='^(linux-vdso|ld-linux|libc\.|libm\.|libgcc_s|libstdc\+\+|libpthread|libdl\.|librt\.|libresolv\.|libcuda\.|libcublas|libcudart|libssl\.|libcrypto\.|libz\.)'
for b in "${bins[@]}"; do
  if ldd "$b" | grep "not found" >&2; then
    echo "stage_build: $b has unresolved libraries (above)" >&2
    exit 1
  fi
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $system ]] && continue
    cp -L "$path" "$dest/lib/$name"
  done
done
echo "stage_build: $(du -sh "$dest" | cut -f1) in $dest: pagoda${engine[*]:+, tests/unit/engine: ${engine[*]}}; lib: $(ls "$dest/lib" | tr '\n' ' ')"
