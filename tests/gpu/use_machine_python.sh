#!/usr/bin/env bash
# On a GPU machine that runs a build made elsewhere (shared/gpu/pack): makes the build's Python path
# (CMakeCache's Python3_EXECUTABLE, where ctest's Python tests start) run this machine's python3,
# the one with torch. A wrapper, not a link: a link to a virtual environment's python loses the
# environment (its site-packages are found from the path it is started by).
#
#   bash tests/gpu/use_machine_python.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: use_machine_python.sh BUILD_DIR}
wanted=$(sed -n 's/^Python3_EXECUTABLE:[A-Z]*=//p' "$build/CMakeCache.txt")
[ -n "$wanted" ] || { echo "use_machine_python: no Python3_EXECUTABLE in $build/CMakeCache.txt" >&2; exit 1; }
here=$(python3 -c 'import sys; print(sys.executable)')
if [ "$here" = "$wanted" ]; then echo "use_machine_python: $wanted is this machine's python3 already"; exit 0; fi
mkdir -p "$(dirname "$wanted")"
rm -f "$wanted" # never write through a link (it may point at the interpreter itself)
printf '#!/bin/sh\nexec %s "$@"\n' "$here" > "$wanted"
chmod +x "$wanted"
"$wanted" -c 'import sys; print("use_machine_python:", sys.executable, sys.version.split()[0])'
