#!/bin/bash
# beside.sh LOG WHAT BACKGROUND -- FOREGROUND: run BACKGROUND with its output in LOG while FOREGROUND runs here, then
# print LOG whole; exit non-zero when either failed (FOREGROUND's code first). `make test` runs the cluster layer
# beside the others this way: measured 2026-11-29, the machine was 47 % idle through the cluster layer alone (its
# pods' starts are mostly waiting) and 21 % idle through the others.
set -u
log=$1 what=$2
shift 2
background=()
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do background+=("$1"); shift; done
shift
mkdir -p "$(dirname "$log")"
echo "$what runs beside, its output in $log (printed here when both are done)"
"${background[@]}" >"$log" 2>&1 &
pid=$!
# Ctrl-C or a kill of make reaches both (one process group); a TERM of this script alone passes it on.
trap 'kill -TERM "$pid" 2>/dev/null' TERM
"$@"
fore=$?
wait "$pid"
back=$?
echo "== $what (from $log)"
cat "$log"
if [ "$fore" -ne 0 ]; then exit "$fore"; fi
exit "$back"
