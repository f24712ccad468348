#!/usr/bin/env bash
# Builds ferry and runs every test on this machine (preset `ci`: warnings as errors, unit tests and
# the conformance suite against every available backend), installing dependencies first.
# FERRY_REQUIRE (e.g. cpu,vulkan) passes through to the tests: a backend it names that cannot
# run here fails the tests instead of being skipped.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

bash scripts/install-deps.sh
echo "test.sh: FERRY_REQUIRE=${FERRY_REQUIRE:-(unset: unavailable backends are skipped)}"
cmake --workflow --preset ci
