#!/usr/bin/env bash
# The main job: install dependencies, build the release preset, then run `ferry bench transfer`
# on the best backend available here (CUDA, then Vulkan, then the CPU reference; on a machine
# without a GPU that is Mesa's lavapipe). On CPU-only machines a quick size list keeps the run
# short. Arguments replace the automatic choice of options, e.g. `--backend vulkan --sizes 1G`.
# The JSON result is also written to build/release/bench_transfer.json.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

bash scripts/install-deps.sh
cmake --preset release
cmake --build --preset release --target ferry_cli
ferry="$root/build/release/cli/ferry"

"$ferry" info
echo
options=("$@")
if ((${#options[@]} == 0)); then
  info_json="$("$ferry" info --json)"
  if [[ $info_json != *'"is_cpu": false'* ]]; then
    echo "bench.sh: no GPU found: quick run on a CPU implementation"
    options=(--quick)
  fi
fi
"$ferry" bench transfer --json-file "$root/build/release/bench_transfer.json" "${options[@]}"
