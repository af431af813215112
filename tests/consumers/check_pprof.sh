#!/bin/sh
# Reads pyscope's pprof output with the real consumer, `go tool pprof`
# (Debian: golang-go). Profiles without a binary need no binary argument:
# pprof only notes "Main binary filename not available." on stderr.
# Usage: check_pprof.sh FILE [FUNCTION...]  - each FUNCTION must show in -top.
set -u
if [ $# -lt 1 ]; then
    echo "usage: $0 FILE [FUNCTION...]" >&2
    exit 2
fi
file=$1
shift
if ! command -v go >/dev/null 2>&1; then
    echo "check_pprof: go not found (apt-get install golang-go)" >&2
    exit 2
fi
# go wants a home for its caches even when it only runs a tool.
: "${HOME:=/tmp}"
export HOME

fail() {
    echo "$file: $*"
    exit 1
}

top=$(go tool pprof -top "$file" 2>/tmp/check_pprof.err.$$) || {
    cat /tmp/check_pprof.err.$$; rm -f /tmp/check_pprof.err.$$
    fail "go tool pprof -top failed"
}
raw=$(go tool pprof -raw "$file" 2>/tmp/check_pprof.err.$$) || {
    cat /tmp/check_pprof.err.$$; rm -f /tmp/check_pprof.err.$$
    fail "go tool pprof -raw failed"
}
tags=$(go tool pprof -tags "$file" 2>/dev/null) || fail "go tool pprof -tags failed"
counts=$(go tool pprof -sample_index=samples -top "$file" 2>/dev/null) ||
    fail "go tool pprof -sample_index=samples -top failed"
rm -f /tmp/check_pprof.err.$$

echo "$raw" | grep -q '^PeriodType: wall nanoseconds$' || fail "-raw shows no wall/nanoseconds period type"
echo "$raw" | grep -q '^samples/count wall/nanoseconds$' || fail "-raw shows other sample types"
echo "$top" | grep -q '^Type: wall$' || fail "-top does not default to the wall value"
for label in thread tid state; do
    echo "$tags" | grep -q "^ *$label: Total" || fail "-tags shows no $label label"
done
for function in "$@"; do
    echo "$top" | grep -q " $function\$" || fail "-top does not show $function"
done
samples=$(echo "$raw" | awk '/^Samples:/{on=1; next} /^Locations/{on=0} on && /^ *[0-9]+ +[0-9]+:/{n++} END{print n+0}')
locations=$(echo "$raw" | awk '/^Locations/{on=1; next} /^Mappings/{on=0} on && /^ *[0-9]+: /{n++} END{print n+0}')
total=$(echo "$counts" | sed -n 's/.*Total samples = \([^ ]*\).*/\1/p')
[ "$samples" -gt 0 ] || fail "no samples"
echo "$file: go tool pprof OK: $samples samples, $locations locations, $total samples in total;" \
     "$(echo "$top" | sed -n 's/^Duration: //p')"
echo "$top" | sed -n '/flat%/,$p' | head -6 | sed "s|^|    |"
