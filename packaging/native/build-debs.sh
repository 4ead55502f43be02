#!/usr/bin/env bash
# Builds the Debian packages libshardopt2, libshardopt-dev and shardopt-tools with cpack into DIST_DIR.
#   packaging/native/build-debs.sh BUILD_DIR DIST_DIR
# BUILD_DIR: a build of this repository whose CMakeLists.txt includes
# packaging/native/packaging.cmake (the main `build` works: the packages' install rules use
# Debian's paths whatever prefix it was configured with). A BUILD_DIR without a CMakeCache.txt is
# configured here for packaging as build-jar.sh does, so either may come first (Release; no tests,
# samples or benchmarks; extra options from $SHARDOPT_CMAKE_ARGS, e.g. -DSHARDOPT_WITH_CUDA=OFF);
# only libshardopt, the static core and the tools are built. $JOBS: parallel jobs (2).
set -euo pipefail
if [ $# -ne 2 ]; then echo "usage: $0 BUILD_DIR DIST_DIR" >&2; exit 2; fi
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(mkdir -p "$1" && cd "$1" && pwd)
mkdir -p "$2"; dist=$(cd "$2" && pwd)
for tool in cmake cpack dpkg-deb dpkg-shlibdeps file; do
  command -v $tool >/dev/null || { echo "build-debs: $tool missing (apt-get install cmake dpkg-dev file)" >&2; exit 3; }
done
if [ ! -f "$build/CMakeCache.txt" ]; then
  # shellcheck disable=SC2086
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSHARDOPT_BUILD_TESTS=OFF \
        -DSHARDOPT_BUILD_SAMPLES=OFF -DSHARDOPT_BUILD_BENCH=OFF ${SHARDOPT_CMAKE_ARGS:-}
fi
if ! grep -q libshardopt-dev "$build/CPackConfig.cmake" 2>/dev/null; then
  echo "build-debs: $build/CPackConfig.cmake has no libshardopt-dev component: the top-level" \
       "CMakeLists.txt must end with include(\${PROJECT_SOURCE_DIR}/packaging/native/packaging.cmake)" >&2
  exit 4
fi
cmake --build "$build" -j "${JOBS:-2}" --target shardopt shardopt_core shardopt-ckpt shardopt-plan
work="$build/packaging/native/cpack"
rm -rf "$work"
# cpack installs each component (builds the `preinstall` target first, i.e. `all` when it is stale)
(cd "$build" && cpack -G DEB --config CPackConfig.cmake -B "$work")
shopt -s nullglob
debs=("$work"/*.deb)
if [ ${#debs[@]} -ne 3 ]; then echo "build-debs: expected 3 packages, got: ${debs[*]}" >&2; exit 1; fi
for deb in "${debs[@]}"; do
  cp "$deb" "$dist/"
  echo "$dist/$(basename "$deb")  $(stat -c %s "$deb") bytes"
  dpkg-deb -f "$deb" Package Version Depends | sed 's/^/    /'
done
