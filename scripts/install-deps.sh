#!/usr/bin/env bash
# Installs the Debian 12 packages needed to build and test ferry. Does nothing when all are
# present. Uses sudo when not root. The CUDA toolkit (nvcc) is optional and not installed here:
# the CUDA backend is built whenever nvcc is found.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config  # compilers and build tools (CMake >= 3.25)
  libvulkan-dev libvulkan-volk-dev              # Vulkan headers and loader; volk loads it at run time
  glslang-tools spirv-tools                     # shaders: glslangValidator, spirv-opt, spirv-val
  doctest-dev                                   # unit tests and conformance suite
  nlohmann-json3-dev                            # tests: parsing the trace files ferry writes
  python3                                       # tools/trace (trace report, pictures) and their test
  python3-dev python3-venv                      # the Python module: headers, and a venv to pip install into
  vulkan-validationlayers                       # Khronos validation, on in the Vulkan tests
  mesa-vulkan-drivers                           # lavapipe: Vulkan on the CPU where there is no GPU
  vulkan-tools                                  # vulkaninfo, for diagnosing driver set-up
  libstb-dev                                    # stb: PNG/JPEG for samples/image_ingest only
  libfaiss-dev                                  # FAISS: bench search's CPU baseline (1 MB, BLAS)
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$package")
  fi
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

as_root=()
if [[ $(id -u) -ne 0 ]]; then
  if ! command -v sudo >/dev/null; then
    echo "install-deps: not root and no sudo; install as root: ${missing[*]}" >&2
    exit 1
  fi
  as_root=(sudo)
fi

echo "install-deps: installing ${missing[*]}"
# apt-get-retry.sh waits for locks held by another apt process (on a freshly booted machine, a
# boot-time update or unattended-upgrades) instead of failing.
apt_get=("${as_root[@]}" bash "$(dirname "${BASH_SOURCE[0]}")/apt-get-retry.sh")
"${apt_get[@]}" -q update
"${apt_get[@]}" install -y -q --no-install-recommends "${missing[@]}"
