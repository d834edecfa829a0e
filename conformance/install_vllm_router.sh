#!/usr/bin/env bash
# Install vLLM's router (`vllm-router` on PyPI) for the conformance tier's fleet.
#
#   bash conformance/install_vllm_router.sh DIR
#
# DIR/vllm-router   a small venv with the pinned router (VLLM_ROUTER_SPEC); its
#                   console script DIR/vllm-router/bin/vllm-router
#
# The package is one manylinux wheel: a Rust router (an abi3 extension module,
# about 24 MB) behind a Python launcher, plus fastapi/uvicorn/aiohttp for its
# debugging-only mini load balancer; nothing is compiled here. It runs in one
# process (no children), so the plugin's ManagedServer stops it like any server.
# Seconds to install. tests/conformance/test_vllm_router_fleet.py starts it in
# front of two llama-servers (conformance/servers.py, start_vllm_router_fleet).
#
# Pinned: the facts in docs/fleets.md ("Routers") were seen on 0.1.17 (its
# /workers JSON, its Prometheus port, its transparent proxy of unknown paths).
set -euo pipefail

dir="${1:?usage: install_vllm_router.sh DIR}"
spec="${VLLM_ROUTER_SPEC:-vllm-router==0.1.17}"
py="${PYTHON:-python3.11}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

rm -rf "$dir/vllm-router"
"$py" -m venv "$dir/vllm-router"
"$dir/vllm-router/bin/python" -m pip install -q --upgrade pip
"$dir/vllm-router/bin/python" -m pip install -q "$spec"
# the launcher imports the Rust router: a wheel without it would only offer the mini LB
"$dir/vllm-router/bin/python" -c "from vllm_router.router import Router; import vllm_router_rs"
"$dir/vllm-router/bin/vllm-router" --help >/dev/null
"$dir/vllm-router/bin/python" -m pip show vllm-router | sed -n 's/^Version: /install: vllm-router /p'
