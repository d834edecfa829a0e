#!/usr/bin/env bash
# The conformance tier, as CI runs it: pytest-llmperf against real servers.
#
#   bash conformance/run.sh [DIR] [-- PYTEST_ARGS...]
#
# DIR: an install folder (see install.sh); installed there first unless it
# holds a finished install; default: a fresh temporary folder. llama-server
# is built once per machine and cached outside DIR (install_llama_server.sh:
# ~/.cache/pytest-llmperf/llama-server/), so a fresh DIR copies it. The model
# is (re)built into DIR/model every time (deterministic, under a second),
# written as GGUF into DIR/model-gguf for llama-server, and given two tiny
# random LoRA adapters in DIR/lora (build_lora_adapters.py) for vLLM; its
# variant with blank replies goes to DIR/model-blank (build_blank_model.py). The
# suite runs with the `pytest` on PATH, i.e. the environment that has
# pytest-llmperf installed (CI's venv), and LLMPERF_CONFORMANCE=DIR, without
# which tests/conformance skips itself.
#
# Bounded everywhere: each server's start and each inner session have their
# own limits (conformance/servers.py, tests/conformance); the whole suite is
# killed after LLMPERF_CONFORMANCE_LIMIT seconds (default 1200), the install
# after 1800 s (a cold llama-server compile beside the venv installs took
# 17 minutes with the two cores busy elsewhere; cached, seconds). A temporary
# folder made here loses its venvs and llama-server copy (5 GB) at exit;
# its logs stay (LLMPERF_CONFORMANCE_KEEP=1 keeps everything).
set -euo pipefail
cd "$(dirname "$0")/.."

dir=""
if [ $# -gt 0 ] && [ "$1" != "--" ]; then dir="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
dir="${dir:-${LLMPERF_CONFORMANCE:-}}"
made_here=0
if [ -z "$dir" ]; then dir="$(mktemp -d -t llmperf-conformance.XXXXXX)"; made_here=1; fi
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

# Every server the tier starts, from its fixtures or inside the sessions it runs
# (--llm-server-cmd), is the plugin's to stop: at the end of its fixture or
# session, or by the plugin's watchdog when pytest dies first. They all inherit
# LLMPERF_CONFORMANCE_RUN; one still alive when the suite has ended outlived
# it: named, killed, and the run fails.
export LLMPERF_CONFORMANCE_RUN="$$.$(date +%s%N)"
leftovers() {  # pids whose environment carries this run's mark (grep's own has none)
  local f
  for f in $(env -u LLMPERF_CONFORMANCE_RUN grep -lzx \
    "LLMPERF_CONFORMANCE_RUN=$LLMPERF_CONFORMANCE_RUN" /proc/[0-9]*/environ 2>/dev/null); do
    f="${f#/proc/}"
    echo "${f%/environ}"
  done
}
cleanup() {
  local status=$? pid found=0 waited=0
  # the plugin's watchdogs end at their pytest's exit: give them a moment
  while [ -n "$(leftovers)" ] && [ "$waited" -lt 15 ]; do sleep 1; waited=$((waited + 1)); done
  for pid in $(leftovers); do
    echo "conformance: a process outlived the suite: $pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-200)" >&2
    kill -KILL "$pid" 2>/dev/null || true
    found=1
  done
  if [ "$made_here" = 1 ] && [ -z "${LLMPERF_CONFORMANCE_KEEP:-}" ]; then
    rm -rf "$dir/vllm" "$dir/transformers" "$dir/llama-server" "$dir/vllm-router" "$dir/.installed"
  fi
  if [ "$found" = 1 ] && [ "$status" = 0 ]; then exit 1; fi
}
trap cleanup EXIT

t0=$(date +%s)
if [ ! -f "$dir/.installed" ]; then
  timeout --kill-after=30 1800 bash conformance/install.sh "$dir"
else
  echo "conformance: using the install in $dir"
  # an install from before llama-server joined the tier: add it (cached build: seconds)
  if [ ! -x "$dir/llama-server/llama-server" ] || [ ! -x "$dir/llama-server/venv/bin/python" ]; then
    timeout --kill-after=30 1800 bash conformance/install_llama_server.sh "$dir"
  fi
  # ... or before vLLM's router joined it (a wheel: seconds)
  if [ ! -x "$dir/vllm-router/bin/vllm-router" ]; then
    timeout --kill-after=30 600 bash conformance/install_vllm_router.sh "$dir"
  fi
fi
echo "conformance: install step took $(( $(date +%s) - t0 )) s"

# Exact prompt lengths need the plugin's optional tokenizer extra in the
# environment under test (a user would install it): install that extra's
# requirements only, leaving the plugin itself (editable or not) as it is.
extra_reqs="$(python -c 'import tomllib; x = tomllib.load(open("pyproject.toml", "rb"))
print(" ".join(x["project"].get("optional-dependencies", {}).get("tokenizers", [])))')"
if [ -n "$extra_reqs" ]; then
  # shellcheck disable=SC2086  # one word per requirement
  python -m pip install -q $extra_reqs
fi

t0=$(date +%s)
"$dir/vllm/bin/python" conformance/build_tiny_model.py "$dir/model"
"$dir/llama-server/venv/bin/python" conformance/build_gguf.py "$dir/model" "$dir/model-gguf/tiny-llama.gguf"
"$dir/vllm/bin/python" conformance/build_lora_adapters.py "$dir/model" "$dir/lora"
"$dir/vllm/bin/python" conformance/build_blank_model.py "$dir/model-blank"
echo "conformance: model built (written as GGUF, two LoRA adapters, the blank variant) in $(( $(date +%s) - t0 )) s"


export LLMPERF_CONFORMANCE="$dir"
limit="${LLMPERF_CONFORMANCE_LIMIT:-1200}"
t0=$(date +%s)
status=0
timeout --kill-after=30 "$limit" \
  pytest tests/conformance -p no:cacheprovider -v -rfEs --durations=10 "$@" || status=$?
echo "conformance: suite finished in $(( $(date +%s) - t0 )) s with status $status"
if [ "$status" = 124 ] || [ "$status" = 137 ]; then
  echo "conformance: the suite hit its ${limit} s limit; server logs are in $dir/logs" >&2
fi
exit "$status"
