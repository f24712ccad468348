#!/usr/bin/env bash
# Builds the binaries for the GPU test machine here (it has nvcc but no Vulkan headers, glslang or
# network) and gathers them in .device/bin, next to the Vulkan loader packages in .gl/.
# Then run scripts/device-run.sh there with both folders carried (see README, "GPU run").
set -euo pipefail
cd "$(dirname "$0")/.."

cmake --preset device
cmake --build --preset device -j"$(nproc)"

rm -rf .device
mkdir -p .device/bin
for exe in cli/ferry tests/ferry_conformance tests/ferry_unit_tests \
           samples/hello_transfer/hello_transfer samples/image_ingest/image_ingest \
           samples/egress_pipeline/egress_pipeline samples/vector_search/vector_search; do
  cp "build/device/$exe" .device/bin/
done
strip .device/bin/*
# Each binary carries ferry and its CUDA kernels for five architectures: compressed, the set fits
# the device tool's 64 MiB carry (device-run.sh unpacks it).
tar cJf .device/bin.tar.xz -C .device bin && rm -rf .device/bin

# The Python module as a wheel for the machine's Python (3.12: FERRY_WHEEL_PYTHON names another
# interpreter of that version), machine code for the H100 only (sm_90), and pytest's wheels (the
# machine has no network).
wheel_python=${FERRY_WHEEL_PYTHON:-$(ls /root/.pyenv/versions/3.12*/bin/python 2>/dev/null | head -n 1)}
wheel_python=${wheel_python:-python3.12}
mkdir -p .device/wheels
"$wheel_python" -m pip wheel . --no-deps --no-build-isolation -w .device/wheels \
  -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90-real -C build-dir=build/python/device-cp312
"$wheel_python" -m pip download -q pytest --only-binary :all: -d .device/wheels

# The Vulkan loader and validation layer for a machine that has only the NVIDIA driver.
if [ ! -d .gl ] || [ -z "$(ls .gl/*.deb 2>/dev/null)" ]; then
  debs=../shared/device-debs
  [ -d "$debs" ] || { echo "no .gl/*.deb and no $debs: fetch libvulkan1 and vulkan-validationlayers" >&2; exit 1; }
  mkdir -p .gl && cp "$debs"/*.deb .gl/
fi
du -sh .device .gl
