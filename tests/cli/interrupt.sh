#!/usr/bin/env bash
# Ctrl-C during a bench (ctest cli.interrupt): the sections measured before it stay printed, the
# --json-file is written and marked "interrupted", the exit status is 130. The signal is sent once
# the first size's section is on stdout, while the second size is being measured (>= 9 s).
set -uo pipefail
ferry=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "cli.interrupt: $*"; echo "--- stdout"; cat "$dir/stdout"; echo "--- stderr"
         cat "$dir/stderr"; exit 1; }

"$ferry" bench transfer --backend cpu --sizes 64K,64M --min-time-ms 1000 \
  --json-file "$dir/result.json" >"$dir/stdout" 2>"$dir/stderr" &
pid=$!
for _ in $(seq 1200); do  # up to 120 s (sanitizer builds are slow)
  grep -q '^64 KiB' "$dir/stdout" && break
  kill -0 "$pid" 2>/dev/null || fail "the bench ended before its first section was printed"
  sleep 0.1
done
grep -q '^64 KiB' "$dir/stdout" || fail "no 64 KiB section after 120 s"
kill -INT "$pid"
wait "$pid"
status=$?

[[ $status == 130 ]] || fail "exit status $status, expected 130"
grep -q '^Interrupted (Ctrl-C) after' "$dir/stdout" || fail "no 'Interrupted' line"
grep -q '^64 MiB' "$dir/stdout" && fail "the interrupted size was printed as if measured"
grep -q '^Summary' "$dir/stdout" && fail "a summary was printed for an interrupted run"
cat >"$dir/check.cmake" <<'CMAKE'
file(READ "${FILE}" text)
string(JSON interrupted ERROR_VARIABLE error GET "${text}" interrupted)
if(error OR NOT interrupted STREQUAL "ON")
  message(FATAL_ERROR "no \"interrupted\": true in ${FILE} (${error})")
endif()
string(JSON rows ERROR_VARIABLE error LENGTH "${text}" sections size_65536 rows)
if(error OR rows LESS 4)
  message(FATAL_ERROR "the 64 KiB section is missing from ${FILE} (${error})")
endif()
CMAKE
cmake -DFILE="$dir/result.json" -P "$dir/check.cmake" || fail "the JSON file is not as expected"
echo "cli.interrupt: exit 130, the 64 KiB section kept, JSON marked interrupted"
