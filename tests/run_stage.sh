#!/bin/sh
# run_stage.sh RESULTS NAME COMMAND...: runs one stage of `make test`, prints
# its time, and appends "NAME SECONDS STATUS" to RESULTS/stages.tsv for the
# summary. Exits 0 even when the stage fails, so that the later stages still
# run; tests/test_summary.py fails the whole run afterwards.
results=$1 name=$2
shift 2
echo "== stage $name: $*"
start=$(date +%s.%N)
"$@"
status=$?
end=$(date +%s.%N)
seconds=$(echo "$end $start" | awk '{printf "%.1f", $1 - $2}')
printf '%s\t%s\t%s\n' "$name" "$seconds" "$status" >>"$results/stages.tsv"
echo "== stage $name: exit $status after ${seconds} s"
exit 0
