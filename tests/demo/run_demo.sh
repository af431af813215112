#!/bin/sh
# Starts the demo program, dumps it with pyscope, and stops it again.
set -eu
pyscope=${1:-./pyscope}
python=${PYTHON:-$(command -v python3)}
here=$(dirname "$0")
"$python" "$here/app.py" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT INT TERM
sleep 1
echo "\$ pyscope dump $pid"
"$pyscope" dump "$pid"
