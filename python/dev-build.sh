#!/usr/bin/env bash
# Builds the module for development without pip: a CMake build of the repository with
# FERRY_PYTHON=ON (tests, samples and CLI off) in build/python-dev, and the package assembled in
# build/python-dev/pkg/ferry. Then: PYTHONPATH=build/python-dev/pkg python -m pytest python/tests
# PYTHON picks the interpreter (default: python3); extra arguments go to CMake's configure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python="${PYTHON:-python3}"
build="${FERRY_PYTHON_BUILD:-build/python-dev}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_PYTHON=ON \
  -DFERRY_BUILD_TESTS=OFF -DFERRY_BUILD_SAMPLES=OFF -DFERRY_BUILD_CLI=OFF -DFERRY_INSTALL=OFF \
  -DPython_EXECUTABLE="$(command -v "$python")" "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
mkdir -p "$build/pkg/ferry"
cp python/ferry/*.py python/ferry/py.typed "$build/pkg/ferry/"
cp "$build"/python/_ferry*.so "$build/python/_ferry.pyi" "$build/pkg/ferry/"
echo "built: $build/pkg (PYTHONPATH=$build/pkg)"
