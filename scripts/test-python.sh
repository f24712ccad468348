#!/usr/bin/env bash
# The Python module as a user gets it: `pip install ".[test]"` from the repository root into a
# fresh virtual environment (build/python-venv; pip fetches scikit-build-core, nanobind, NumPy and
# pytest from PyPI and builds libferry and the module with CMake), then its pytest suite
# (python/tests) on every available backend; FERRY_REQUIRE (e.g. cpu,vulkan) makes a missing
# backend a failure. Run by scripts/test.sh as its `python` step.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=build/python-venv
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
start=$SECONDS
"$venv/bin/python" -m pip install ".[test]"
echo "test-python: pip install took $((SECONDS - start)) s"
# From outside the source tree, so `import ferry` is the installed package.
cd build
FERRY_VALIDATION="${FERRY_VALIDATION:-1}" "../$venv/bin/python" -m pytest ../python/tests -q -rs \
  -p no:cacheprovider
