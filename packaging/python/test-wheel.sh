#!/usr/bin/env bash
# ctest packaging.python_wheel: builds the wheel from BUILD_DIR (reused, nothing recompiled) into
# WORK/dist, installs it into a fresh venv from local files only (--no-index), and runs 2 UCX
# ranks with `python -m shardopt.run -n 2` from an empty directory, with a PATH that holds neither
# the build tree nor the source tree and no LD_LIBRARY_PATH/PYTHONPATH. The ranks check that
# libshardopt and UCX were loaded from the venv (the libucx-cu13 wheel), not from the system, then
# runs the wheel's offline checkpoint tool (shardopt-ckpt) on the checkpoint the ranks saved.
# Exits 77 (skipped) when the tools or dependency wheels cannot be had (offline, no venv module).
# Usage: packaging/python/test-wheel.sh BUILD_DIR WORK_DIR
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$1
WORK=$2
PY=${PYTHON:-python3}
"$PY" -c "import venv, ensurepip" 2>/dev/null || { echo "SKIP: $PY has no venv/ensurepip (apt-get install python3-venv)"; exit 77; }
rm -rf "$WORK"
mkdir -p "$WORK/dist" "$WORK/run"
rc=0
SHARDOPT_WHEEL_NO_SDIST=1 "$ROOT/packaging/python/build-wheel.sh" "$BUILD" "$WORK/dist" >"$WORK/build.log" 2>&1 || rc=$?
if [ $rc -eq 77 ]; then tail -3 "$WORK/build.log"; echo "SKIP: could not get the packaging tools or dependency wheels"; exit 77; fi
[ $rc -eq 0 ] || { cat "$WORK/build.log"; exit $rc; }
WHEEL=$(ls "$WORK"/dist/shardopt-*.whl)
echo "wheel: $(basename "$WHEEL") ($(du -k "$WHEEL" | cut -f1) KiB)"
# A module built against the limited API (bindings/python/python.cmake) makes one wheel for every CPython >= 3.11,
# holding that module; else the wheel is the build's Python's alone.
if [ -f "$BUILD/bindings/python/shardopt/_shardopt_native.abi3.so" ]; then TAG=cp311-abi3 MODULE=_shardopt_native.abi3.so
else TAG=$("$PY" -c 'import sys; print("cp%d%d-cp%d%d" % (sys.version_info[:2] * 2))') MODULE=_shardopt_native.so; fi
case $(basename "$WHEEL") in
  shardopt-*-"$TAG"-manylinux*.whl) ;;
  *) echo "FAIL: the wheel is not tagged $TAG-manylinux*: $(basename "$WHEEL")"; exit 1 ;;
esac
# (read in one process: `zipfile -l | grep -q` failed under pipefail when grep's early exit broke zipfile's pipe)
"$PY" -c 'import sys, zipfile; sys.exit(sys.argv[2] not in zipfile.ZipFile(sys.argv[1]).namelist())' \
    "$WHEEL" "shardopt/$MODULE" ||
  { echo "FAIL: the wheel does not hold shardopt/$MODULE"; "$PY" -m zipfile -l "$WHEEL"; exit 1; }

"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q --disable-pip-version-check --no-index \
    --find-links "$WORK/dist/wheels" "$WHEEL"
cp "$ROOT/packaging/python/check_ucx.py" "$ROOT/samples/python/mlp_demo.py" "$WORK/run/"
cd "$WORK/run"
# Nothing of the build or source tree on any path; no compiler is used from here on.
env -i HOME="$WORK/run" PATH="$WORK/venv/bin" LANG=C.UTF-8 \
    python -c "import shardopt, sys; m = sys.modules['shardopt._shardopt_native'].__file__; \
assert m.endswith('/$MODULE'), m; print('import ok', shardopt.__version__, shardopt.__file__, m)"
env -i HOME="$WORK/run" PATH="$WORK/venv/bin" LANG=C.UTF-8 \
    python -m shardopt.run -n 2 --timeout 90 check_ucx.py
# The offline checkpoint tool from the wheel: the console script and shardopt.ckpt find the copy
# inside the package, which runs without the build tree's libraries.
env -i HOME="$WORK/run" PATH="$WORK/venv/bin" LANG=C.UTF-8 shardopt-ckpt verify checkpoint
env -i HOME="$WORK/run" PATH="$WORK/venv/bin" LANG=C.UTF-8 python - <<'PYEOF'
import os, sys
from shardopt import ckpt
tool = ckpt.tool()
assert os.path.realpath(tool).startswith(os.path.realpath(sys.prefix)), f"the tool is not the wheel's: {tool}"
ckpt.convert("checkpoint", "consolidated")
info = ckpt.verify("consolidated")
assert info["form"] == "consolidated", info
assert info["digests"] == ckpt.verify("checkpoint")["digests"]
print(f"shardopt-ckpt from the wheel ({tool}): sharded -> consolidated, digests equal")
PYEOF
echo "packaging.python_wheel: ok"
