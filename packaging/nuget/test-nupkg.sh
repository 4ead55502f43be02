#!/usr/bin/env bash
# ctest packaging.nuget: packs the .nupkg from BUILD_DIR (reused) into WORK/dist, installs it
# from that folder into an empty directory (nuget install -Source), compiles Check.cs against the
# installed assembly alone with mcs, and runs it with mono on 2 in-process ranks with nothing
# else on any path: PATH holds only mono, LD_LIBRARY_PATH only the package's
# runtimes/linux-x64/native. Exits 77 (skipped) when nuget, mcs or mono is missing.
# Usage: packaging/nuget/test-nupkg.sh BUILD_DIR WORK_DIR
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$1
WORK=$2
for t in nuget mcs mono; do
  command -v $t >/dev/null || { echo "SKIP: $t not found (apt-get install -y nuget mono-mcs mono-runtime)"; exit 77; }
done
rm -rf "$WORK"
mkdir -p "$WORK/dist" "$WORK/packages" "$WORK/app" "$WORK/bin"
rc=0
"$ROOT/packaging/nuget/build-nupkg.sh" "$BUILD" "$WORK/dist" >"$WORK/build.log" 2>&1 || rc=$?
[ $rc -eq 77 ] && { cat "$WORK/build.log"; echo "SKIP: cannot pack the .nupkg here"; exit 77; }
[ $rc -eq 0 ] || { cat "$WORK/build.log"; exit $rc; }
PKG=$(ls "$WORK"/dist/Shardopt.*.nupkg)
VERSION=$(basename "$PKG" .nupkg); VERSION=${VERSION#Shardopt.}
echo "package: $(basename "$PKG") ($(du -k "$PKG" | cut -f1) KiB)"
# nuget 2.8 wants a writable HOME for its config/cache
export HOME=$WORK/home; mkdir -p "$HOME"
nuget install Shardopt -Version "$VERSION" -Source "$WORK/dist" -OutputDirectory "$WORK/packages" -NonInteractive
INST=$WORK/packages/Shardopt.$VERSION
NATIVE=$INST/runtimes/linux-x64/native
ls "$INST/lib/net45/Shardopt.dll" "$NATIVE/libshardopt_csharp.so" >/dev/null
cp "$ROOT/packaging/nuget/Check.cs" "$WORK/app/"
cd "$WORK/app"
mcs -nologo -r:"$INST/lib/net45/Shardopt.dll" -out:Check.exe Check.cs
cp "$INST/lib/net45/Shardopt.dll" .        # as a consumer's build copies its references
ln -s "$(command -v mono)" "$WORK/bin/mono"
env -i HOME="$HOME" PATH="$WORK/bin" LD_LIBRARY_PATH="$NATIVE" LANG=C.UTF-8 mono Check.exe
# the libraries came from the package: every non-system library libshardopt_csharp.so resolves
LD_LIBRARY_PATH="$NATIVE" ldd "$NATIVE/libshardopt_csharp.so" | awk '/=>/ {print $1, $3}' |
  grep -v -E '^(linux-vdso|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libstdc\+\+\.so|libgcc_s\.so|ld-linux)' |
  while read -r name path; do
    case "$path" in "$NATIVE"/*) ;; *) echo "not from the package: $name => $path"; exit 1;; esac
  done
echo "packaging.nuget: ok"
