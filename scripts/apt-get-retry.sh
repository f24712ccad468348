#!/usr/bin/env bash
# apt-get "$@", waiting for every apt lock another process holds (a boot-time `apt-get update`,
# unattended-upgrades) instead of failing. DPkg::Lock::Timeout waits for dpkg's lock only; the
# package lists' lock (/var/lib/apt/lists/lock, taken by `apt-get update`) and the archives' lock
# make apt-get fail at once (exit 100, "Could not get lock"), so such a failure is retried every
# 5 s, with a message, for up to FERRY_APT_LOCK_WAIT seconds (default 900). Any other failure
# is returned as it is. Run as root (install-deps.sh adds sudo).
set -euo pipefail

wait_limit=${FERRY_APT_LOCK_WAIT:-900}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$SECONDS
announced=0
# apt's own lock errors (and the "Reading package lists..." before each) are left out of what is
# shown: the message below says it once, instead of three lines every 5 s. apt's "Waiting for
# cache lock" (dpkg's lock, every second) is shown once.
show() {
  awk '/^Reading package lists/ { held = $0; next }
       /^E: (Could not get lock|Unable to lock)/ { held = ""; next }
       /^Waiting for cache lock/ { if (held != "") print held; held = ""
                                   if (!waiting) print; waiting = 1; fflush(); next }
       { if (held != "") print held; held = ""; print; fflush() }
       END { if (held != "") print held }'
}
while true; do
  status=0
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$wait_limit" "$@" 2>&1 |
    tee "$log" | show || status=$?
  if ((status == 0)); then exit 0; fi
  lock=$(grep -m1 -oE 'Could not get lock [^ ]+' "$log" | sed -e 's/^Could not get lock //' -e 's/\.$//' || true)
  if [[ -z "$lock" ]]; then exit "$status"; fi
  holder=$(grep -m1 -oE 'held by process [0-9]+( \([^)]*\))?' "$log" || true)
  waited=$((SECONDS - start))
  if ((waited >= wait_limit)); then
    echo "apt-get-retry: gave up after ${waited} s waiting for $lock${holder:+ (${holder})}" >&2
    exit "$status"
  fi
  if ((announced == 0 || waited % 30 < 5)); then
    echo "apt-get-retry: $lock is ${holder:-held by another process}; waiting for it" \
         "(${waited} s so far, at most ${wait_limit} s)" >&2
    announced=1
  fi
  sleep 5
done
