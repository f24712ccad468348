#!/usr/bin/env bash
# scripts/apt-get-retry.sh against a real apt lock: a process holds the package lists' lock while
# `apt-get update` runs through it; it must wait, say so, and succeed once the lock is released.
# Then a failure that is not a lock must come back at once. apt works in a private lists and cache
# folder with no sources, so nothing on the machine changes and no network is used.
# Exit 77 (skipped) without apt-get or python3, or when not root.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if ! command -v apt-get >/dev/null || ! command -v python3 >/dev/null || [[ $(id -u) -ne 0 ]]; then
  echo "skipped: needs apt-get, python3 and root"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/sources.d"
: >"$tmp/sources.list"
apt_dirs=(-o Dir::State::Lists="$tmp/lists" -o Dir::Cache="$tmp/cache"
          -o Dir::Etc::sourcelist="$tmp/sources.list" -o Dir::Etc::sourceparts="$tmp/sources.d")

# apt takes its locks with fcntl(F_SETLK); python's lockf is the same kind of lock.
python3 - "$tmp/lists/lock" "$tmp/held" <<'PY' &
import fcntl, sys, time
with open(sys.argv[1], "w") as lock:
    fcntl.lockf(lock, fcntl.LOCK_EX)
    open(sys.argv[2], "w").close()
    time.sleep(8)
PY
holder=$!
while [[ ! -e "$tmp/held" ]]; do sleep 0.1; done

start=$SECONDS
FERRY_APT_LOCK_WAIT=60 bash "$root/scripts/apt-get-retry.sh" "${apt_dirs[@]}" update \
  >"$tmp/out" 2>&1 || { cat "$tmp/out"; echo "FAIL: apt-get update did not succeed after the lock was released"; exit 1; }
waited=$((SECONDS - start))
wait "$holder"
cat "$tmp/out"
grep -q "apt-get-retry: .*lock is held by process [0-9]* (python3); waiting" "$tmp/out" ||
  { echo "FAIL: no message while waiting for the lock"; exit 1; }
((waited >= 5)) || { echo "FAIL: finished after ${waited} s while the lock was held for 8 s"; exit 1; }
echo "ok: waited ${waited} s for the held lock, then succeeded"

# Not a lock: returned at once with apt's status.
start=$SECONDS
status=0
bash "$root/scripts/apt-get-retry.sh" "${apt_dirs[@]}" install -y --simulate \
  ferry-no-such-package >"$tmp/out" 2>&1 || status=$?
((status == 100 && SECONDS - start < 5)) ||
  { cat "$tmp/out"; echo "FAIL: a missing package gave status $status after $((SECONDS - start)) s"; exit 1; }
echo "ok: a failure that is not a lock returned at once (status $status)"
