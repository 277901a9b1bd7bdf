#!/bin/bash
# quietly.sh LOG WHAT COMMAND...: run COMMAND with its whole output in LOG, say one line (WHAT) instead, and on a
# failure the last lines of LOG and where LOG is. For set-up steps whose tools talk a lot (apt's and dpkg's line
# per package, Maven's downloads): a cold `make run` should show what it installs, not how.
set -u
log=$1 what=$2
shift 2
mkdir -p "$(dirname "$log")"
echo "$what (log: $log)"
if "$@" >"$log" 2>&1; then
  exit 0
else
  code=$?
  echo "error: $what failed (exit $code); its last lines, the whole output in $log:" >&2
  tail -n 20 "$log" >&2
  exit "$code"
fi
