#!/usr/bin/env bash
# Builds ferry and runs every test on this machine, installing dependencies first. Three CMake
# workflow presets, one after another, each configured, built and tested in build/<preset>:
#   ci    warnings as errors; unit tests, the conformance suite against every available backend
#         (Vulkan under the Khronos validation layer) and the CLI/sample smoke tests
#   asan  the same tests under AddressSanitizer (LeakSanitizer included) + UndefinedBehaviorSanitizer
#   tsan  the same tests under ThreadSanitizer
# and one more step, `python` (scripts/test-python.sh): the Python module installed with
# `pip install .[test]` into a fresh virtual environment, and its pytest suite.
# Any failure (build, test, sanitizer finding) stops the script with a non-zero status.
#
# Environment:
#   FERRY_TEST_PRESETS  the workflow presets to run, comma- or space-separated, in order
#                       (unset or empty: ci,python,asan,tsan; FERRY_TEST_PRESETS=ci for a quick
#                       local run)
#   FERRY_REQUIRE       (e.g. cpu,vulkan) passes through to the tests: a backend it names that
#                       cannot run here fails the tests instead of being skipped
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

presets=()
IFS=', ' read -r -a names <<<"${FERRY_TEST_PRESETS:-ci,python,asan,tsan}"
for name in "${names[@]}"; do
  if [[ -n "$name" ]]; then presets+=("$name"); fi
done
if ((${#presets[@]} == 0)); then
  echo "test.sh: FERRY_TEST_PRESETS names no preset" >&2
  exit 2
fi
for preset in "${presets[@]}"; do
  case "$preset" in
    ci | asan | tsan | python) ;;
    *) echo "test.sh: unknown preset '$preset' in FERRY_TEST_PRESETS (ci, python, asan, tsan)" >&2; exit 2 ;;
  esac
done

bash scripts/install-deps.sh
echo "test.sh: FERRY_REQUIRE=${FERRY_REQUIRE:-(unset: unavailable backends are skipped)}"
echo "test.sh: presets: ${presets[*]}"

times=()
for preset in "${presets[@]}"; do
  echo "test.sh: === workflow preset $preset (configure, build, test) ==="
  start=$SECONDS
  status=0
  if [[ "$preset" == python ]]; then
    bash scripts/test-python.sh || status=$?
  else
    cmake --workflow --preset "$preset" || status=$?
  fi
  elapsed=$((SECONDS - start))
  times+=("$preset $((elapsed / 60))m$((elapsed % 60))s")
  if ((status != 0)); then
    echo "test.sh: preset $preset FAILED (exit $status) after $((elapsed / 60))m$((elapsed % 60))s" >&2
    exit "$status"
  fi
  echo "test.sh: preset $preset passed in $((elapsed / 60))m$((elapsed % 60))s"
done
echo "test.sh: all passed:"
printf 'test.sh:   %s\n' "${times[@]}"
