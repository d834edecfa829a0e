#!/usr/bin/env bash
# Install llama.cpp's `llama-server` for the conformance tier: build it, or reuse a cached build.
#
#   bash conformance/install_llama_server.sh DIR
#
# DIR/llama-server/llama-server      the binary
# DIR/llama-server/build-info.json   sdist version and sha256, llama.cpp commit, cmake options, build time
# DIR/llama-server/venv              a small venv with the pinned `gguf` package (GGUF_SPEC), for
#                                    conformance/build_gguf.py, which writes the tiny model as GGUF
#
# The
# sources are the llama.cpp that the `llama-cpp-python` sdist on PyPI vendors
# (vendor/llama.cpp, pinned below by version and sha256), built for the CPU
# only: no web UI (and no download of a prebuilt one), no OpenSSL, no curl,
# static llama/ggml libraries, only the `llama-server` target. About 6 minutes
# on 2 cores (LLAMA_SERVER_JOBS, default 2).
#
# The binary is cached by the sdist's sha256 and the build options in
#   ${LLMPERF_LLAMA_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pytest-llmperf/llama-server}/<sha256>/
# outside the repository, so a later run on this machine (CI included) copies
# it in a second instead of building; it is rebuilt when absent, when the
# recorded options differ, or when the cached binary does not run. A lock
# keeps two concurrent runs from building twice. Nothing is fetched when the
# cache holds the build (the sha256 is pinned here, so the key is known
# without downloading).
#
# Override the pin with LLAMA_CPP_PYTHON_VERSION=... and
# LLAMA_CPP_PYTHON_SHA256=... (both, to try another release).
set -euo pipefail

dir="${1:?usage: install_llama_server.sh DIR}"
gguf_spec="${GGUF_SPEC:-gguf==0.19.0}"
safetensors_spec="${SAFETENSORS_SPEC:-safetensors==0.8.0}"
version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
sha256="${LLAMA_CPP_PYTHON_SHA256:-832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e}"
py="${PYTHON:-python3.11}"
jobs="${LLAMA_SERVER_JOBS:-2}"
cache_root="${LLMPERF_LLAMA_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pytest-llmperf/llama-server}"
cache="$cache_root/$sha256"

# CPU only, portable (GGML_NATIVE=OFF: the cached binary must not depend on
# the build host's exact CPU), no UI (neither npm nor the prebuilt download
# that LLAMA_USE_PREBUILT_UI would fetch), no OpenSSL (LLAMA_CURL is gone in
# this llama.cpp: it now warns that the option is ignored), static libs so
# the binary is one file, no tests/examples/app.
cmake_options=(
  -DCMAKE_BUILD_TYPE=Release
  -DBUILD_SHARED_LIBS=OFF
  -DGGML_NATIVE=OFF
  -DGGML_CCACHE=OFF
  -DLLAMA_OPENSSL=OFF
  -DLLAMA_BUILD_UI=OFF
  -DLLAMA_USE_PREBUILT_UI=OFF
  -DLLAMA_BUILD_SERVER=ON
  -DLLAMA_BUILD_TOOLS=ON
  -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_EXAMPLES=OFF
  -DLLAMA_BUILD_APP=OFF
)
options_line="${cmake_options[*]}"

mkdir -p "$dir/llama-server" "$cache_root"
dest="$(cd "$dir/llama-server" && pwd)"

cached_ok() {
  [ -x "$cache/llama-server" ] && [ -f "$cache/build-info.json" ] \
    && grep -qF "\"cmake_options\": \"$options_line\"" "$cache/build-info.json" \
    && "$cache/llama-server" --version >/dev/null 2>&1
}

work=""  # the build folder (sources, objects: ~1 GB), removed on any exit of the subshell below

build() {
  local t0 t_build sdist src
  work="$(mktemp -d -t llama-server-build.XXXXXX)"
  t0=$(date +%s)
  echo "llama-server: downloading the llama-cpp-python $version sdist"
  # the sdist only (--no-binary for this package alone: `:all:` would also
  # build pip's metadata-preparation dependencies from source)
  "$py" -m pip download -q --no-deps --no-binary llama-cpp-python "llama-cpp-python==$version" \
    -d "$work/sdist"
  sdist="$(ls "$work"/sdist/llama_cpp_python-*.tar.gz)"
  local got
  got="$(sha256sum "$sdist" | cut -d' ' -f1)"
  if [ "$got" != "$sha256" ]; then
    echo "llama-server: $sdist has sha256 $got, expected $sha256" >&2
    return 1
  fi
  tar -xzf "$sdist" -C "$work"
  src="$(ls -d "$work"/llama_cpp_python-*/vendor/llama.cpp)"
  [ -f "$src/tools/server/server.cpp" ] || {
    echo "llama-server: $src has no tools/server" >&2
    return 1
  }
  local commit
  commit="$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "llama-server: configuring llama.cpp $commit ($options_line)"
  t_build=$(date +%s)
  cmake -S "$src" -B "$work/build" -G Ninja "${cmake_options[@]}" >"$work/configure.log" 2>&1 || {
    tail -n 40 "$work/configure.log" >&2
    return 1
  }
  echo "llama-server: building with -j$jobs"
  cmake --build "$work/build" --target llama-server -j "$jobs" >"$work/build.log" 2>&1 || {
    tail -n 60 "$work/build.log" >&2
    return 1
  }
  local bin="$work/build/bin/llama-server"
  "$bin" --version >"$work/version.txt" 2>&1
  local built=$(( $(date +%s) - t_build ))
  rm -rf "$cache.tmp"
  mkdir -p "$cache.tmp"
  cp "$bin" "$cache.tmp/llama-server"
  strip "$cache.tmp/llama-server" 2>/dev/null || true
  "$py" - "$cache.tmp/build-info.json" "$version" "$sha256" "$commit" "$options_line" \
    "$built" "$(( $(date +%s) - t0 ))" "$work/version.txt" <<'EOF'
import json, sys
out, version, sha, commit, options, built, total, vfile = sys.argv[1:]
info = {
    "llama_cpp_python": version,
    "sdist_sha256": sha,
    "llama_cpp_commit": commit,
    "cmake_options": options,
    "build_seconds": int(built),
    "total_seconds": int(total),
    "version_output": open(vfile).read().strip().splitlines(),
}
open(out, "w").write(json.dumps(info, indent=2) + "\n")
EOF
  rm -rf "$cache"
  mv "$cache.tmp" "$cache"
  rm -rf "$work"
  work=""
  echo "llama-server: built in ${built} s (with download $(( $(date +%s) - t0 )) s), cached in $cache"
}

(
  trap '[ -z "$work" ] || rm -rf "$work" "$cache.tmp"' EXIT
  flock -w 3600 9 || { echo "llama-server: cache lock busy for an hour" >&2; exit 1; }
  if cached_ok; then
    echo "llama-server: using the cached build in $cache"
  else
    build
    cached_ok || { echo "llama-server: the build in $cache does not run" >&2; exit 1; }
  fi
  cp "$cache/llama-server" "$dest/llama-server.tmp"
  mv "$dest/llama-server.tmp" "$dest/llama-server"
  cp "$cache/build-info.json" "$dest/build-info.json"
) 9>"$cache_root/.lock"
"$dest/llama-server" --version 2>&1 | sed 's/^/llama-server: /'

# the GGUF writer's venv (seconds; numpy comes with gguf)
if ! "$dest/venv/bin/python" -c 'import gguf, safetensors' 2>/dev/null; then
  rm -rf "$dest/venv"
  "$py" -m venv "$dest/venv"
  "$dest/venv/bin/python" -m pip install -q "$gguf_spec" "$safetensors_spec"
fi
"$dest/venv/bin/python" -c 'import importlib.metadata as m; print("llama-server: venv gguf", m.version("gguf"), "safetensors", m.version("safetensors"), "numpy", m.version("numpy"))'
