#!/usr/bin/env bash
# The main job: install dependencies, build the release preset, then on the best backend
# available here (auto: a CUDA GPU, then a Vulkan GPU, else the CPU reference backend, which is
# faster than Vulkan on the CPU) run `ferry bench transfer`, `ferry bench ingress` and the
# image_ingest sample (its contact sheet goes to build/release/image_ingest/). Without a GPU,
# quick settings keep the run short. Arguments replace the automatic choice of options for
# `bench transfer`, e.g. `--backend vulkan --sizes 64M,256M`, and then only that runs. JSON
# results are also written to build/release/bench_transfer.json and bench_ingress.json.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

bash scripts/install-deps.sh
cmake --preset release
cmake --build --preset release --target ferry_cli image_ingest
ferry="$root/build/release/cli/ferry"

"$ferry" info
echo
if (($# > 0)); then
  exec "$ferry" bench transfer --json-file "$root/build/release/bench_transfer.json" "$@"
fi
options=()
info_json="$("$ferry" info --json)"
if [[ $info_json != *'"is_cpu": false'* ]]; then
  echo "bench.sh: no GPU found: quick runs on the CPU reference backend (Device::open(\"auto\")"
  echo "bench.sh: prefers it to a Vulkan implementation on the CPU such as lavapipe, which is"
  echo "bench.sh: about 20x slower for normalize; add --backend vulkan to measure that instead)"
  options=(--quick)
fi
"$ferry" bench transfer --json-file "$root/build/release/bench_transfer.json" "${options[@]}"
echo
ingress_options=("${options[@]}")
# On a CPU implementation even the quick full-HD batches take minutes: one small shape there.
((${#options[@]} == 0)) || ingress_options+=(--shapes 16x224x224x3)
"$ferry" bench ingress --json-file "$root/build/release/bench_ingress.json" "${ingress_options[@]}"
echo
"$root/build/release/samples/image_ingest/image_ingest" \
  --images "$root/samples/image_ingest/images" --out "$root/build/release/image_ingest"
