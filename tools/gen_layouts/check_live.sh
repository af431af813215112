#!/bin/sh
# Runs live_target.py under each interpreter on this machine and checks the
# layouts against it with check_live. With --capture DIR it also stores the
# first 4096 bytes of _PyRuntime of each 3.13+ target as a unit-test fixture.
#
# Usage: tools/gen_layouts/check_live.sh CHECK_LIVE-BINARY [--capture DIR]
set -eu

here=$(cd "$(dirname "$0")" && pwd)
checker=$1
capture_dir=
[ "${2:-}" = "--capture" ] && capture_dir=$3
pyenv_root=${PYENV_ROOT:-$(pyenv root 2>/dev/null || echo /root/.pyenv)}
debian_pythons=${DEBIAN_PYTHONS:-/root/.cache/debian-python}
work=$(mktemp -d /tmp/check_live.XXXXXX)
trap 'rm -rf "$work"' EXIT

# name  interpreter  fixture-file (empty: none)
targets="
pyenv-3.8 $pyenv_root/versions/3.8.18/bin/python3.8 -
pyenv-3.9 $pyenv_root/versions/3.9.18/bin/python3.9 -
pyenv-3.10 $pyenv_root/versions/3.10.13/bin/python3.10 -
pyenv-3.11 $pyenv_root/versions/3.11.7/bin/python3.11 -
debian-3.11 /usr/bin/python3.11 -
pyenv-3.12 $pyenv_root/versions/3.12.1/bin/python3.12 -
pyenv-3.13 $pyenv_root/versions/3.13.0/bin/python3.13 debug_offsets_3.13.0.bin
debian-3.13 $debian_pythons/3.13/root/usr/bin/python3.13 debug_offsets_3.13.bin
debian-3.14 $debian_pythons/3.14/root/usr/bin/python3.14 debug_offsets_3.14.bin
debian-3.15 $debian_pythons/3.15/root/usr/bin/python3.15 debug_offsets_3.15.bin
"

failures=$work/failures
: > "$failures"
echo "$targets" | while read -r name python fixture; do
    [ -n "$name" ] || continue
    if [ ! -x "$python" ]; then
        echo "== $name: $python missing, skipped"
        continue
    fi
    facts=$work/$name.facts
    "$python" "$here/live_target.py" "$facts" &
    pid=$!
    tries=0
    while [ ! -f "$facts" ] && [ $tries -lt 100 ]; do
        sleep 0.1
        tries=$((tries + 1))
    done
    sleep 0.3   # let both threads settle into time.sleep
    echo "== $name (pid $pid)"
    set -- "$pid" "$facts"
    if [ -n "$capture_dir" ] && [ "$fixture" != "-" ]; then
        set -- "$@" --dump "$capture_dir/$fixture"
    fi
    "$checker" "$@" || echo "$name" >> "$failures"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
done
if [ -s "$failures" ]; then
    echo "FAILED: $(tr '\n' ' ' < "$failures")"
    exit 1
fi
echo "all targets passed"
