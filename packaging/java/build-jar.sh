#!/usr/bin/env bash
# The Java artifact: DIST_DIR/shardopt-<version>.jar (classes + linux-x86_64 natives, with its
# pom.xml under META-INF/maven/) and DIST_DIR/shardopt-<version>.pom (org.shardopt:shardopt).
#   packaging/java/build-jar.sh BUILD_DIR DIST_DIR
# BUILD_DIR: a build of this repository with the Java binding (the main `build` works); one
# without a CMakeCache.txt is configured here (Release, no tests, samples or benchmarks; extra
# options from $SHARDOPT_CMAKE_ARGS). The natives' run-time needs are checked with ldd: besides
# glibc, libstdc++ and libgcc_s only UCX (and libnuma under it) and xxhash are allowed, and they
# are declared in the pom and the manifest (NativeLoader loads only the jar's two libraries, so
# they cannot be bundled without changing it).
set -euo pipefail
if [ $# -ne 2 ]; then echo "usage: $0 BUILD_DIR DIST_DIR" >&2; exit 2; fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(mkdir -p "$1" && cd "$1" && pwd)
mkdir -p "$2"; dist=$(cd "$2" && pwd)
for tool in cmake jar ldd readelf; do
  command -v $tool >/dev/null || { echo "build-jar: $tool missing (apt-get install default-jdk-headless binutils)" >&2; exit 3; }
done
if [ ! -f "$build/CMakeCache.txt" ]; then
  # shellcheck disable=SC2086
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSHARDOPT_BUILD_TESTS=OFF \
        -DSHARDOPT_BUILD_SAMPLES=OFF -DSHARDOPT_BUILD_BENCH=OFF ${SHARDOPT_CMAKE_ARGS:-}
fi
targets=$(cmake --build "$build" --target help)
if ! grep -q shardopt_jar <<<"$targets"; then
  echo "build-jar: $build has no Java binding (target shardopt_jar): a JDK and SWIG are needed, and" \
       "SHARDOPT_BUILD_BINDINGS=ON" >&2
  exit 3
fi
cmake --build "$build" -j "${JOBS:-2}" --target shardopt_jar
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
in_jar=$build/bindings/java/shardopt.jar
work=$build/packaging/java
rm -rf "$work"; mkdir -p "$work/classes"
(cd "$work/classes" && jar xf "$in_jar" && rm -f META-INF/MANIFEST.MF)
native=$work/classes/org/shardopt/native/linux-x86_64
abi=$(cd "$native" && ls libshardopt.so.* | sed 's/libshardopt\.so\.//')
[ -f "$native/libshardopt_java.so" ] && [ -n "$abi" ] || { echo "build-jar: natives missing in $in_jar" >&2; exit 1; }

# The natives must not point into the build tree: an RPATH/RUNPATH other than $ORIGIN (the JNI
# module's build RPATH names build/capi) becomes $ORIGIN, with patchelf when present, else by
# shortening the string in place as chrpath does.
for lib in "$native"/*.so*; do
  rp=$(readelf -d "$lib" | sed -n 's/.*(R[UN]*PATH).*\[\(.*\)\]$/\1/p')
  [ -z "$rp" ] || [ "$rp" = '$ORIGIN' ] && continue
  if command -v patchelf >/dev/null; then
    patchelf --set-rpath '$ORIGIN' "$lib"
  else
    python3 - "$lib" "$rp" <<'PY'
import sys
path, rp = sys.argv[1], sys.argv[2].encode() + b"\0"
data = open(path, "rb").read()
if data.count(rp) != 1 or len(rp) < 8:
    sys.exit("build-jar: cannot rewrite the RUNPATH of %s (install patchelf)" % path)
open(path, "wb").write(data.replace(rp, b"$ORIGIN".ljust(len(rp), b"\0")))
PY
  fi
  rp=$(readelf -d "$lib" | sed -n 's/.*(R[UN]*PATH).*\[\(.*\)\]$/\1/p')
  [ "$rp" = '$ORIGIN' ] || { echo "build-jar: $(basename "$lib") still has RUNPATH $rp" >&2; exit 1; }
done
# What they need at run time, beyond the base system.
base='^(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux-x86-64|linux-vdso)\.so'
allowed='^(libucp|libucs|libuct|libucm|libnuma|libxxhash)\.so'
needs=(); pkgs=()
while read -r name path; do
  [[ $name =~ $base ]] && continue
  [ "$name" = libshardopt.so.$abi ] && continue
  if [[ ! $name =~ $allowed ]]; then echo "build-jar: the natives need $name ($path), which is neither bundled nor allowed" >&2; exit 1; fi
  [ "$path" = "not" ] && { echo "build-jar: $name not found here" >&2; exit 1; }
  needs+=("$name")
  if command -v dpkg >/dev/null; then
    pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -1 | cut -d: -f1) || true
    [ -n "$pkg" ] && pkgs+=("$pkg")
  fi
done < <(cd "$native" && LD_LIBRARY_PATH=$native ldd ./*.so* | awk '/=>/ {print $1, $3} !/=>/ && NF>1 {n=$1; sub(".*/", "", n); print n, "-"}' | sort -u)
requires=$(printf '%s\n' "${needs[@]}" | sort -u | paste -sd, - | sed 's/,/, /g')
debs=$(printf '%s\n' "${pkgs[@]}" | sort -u | paste -sd' ' -)
[ -n "$debs" ] || debs="libucx0 libxxhash0"

sed -e "s/@VERSION@/$version/g" -e "s/@ABI@/$abi/g" -e "s/@NATIVE_REQUIRES@/$requires/g" \
    -e "s/@DEBIAN_PACKAGES@/$debs/g" "$here/pom.xml.in" > "$work/pom.xml"
if command -v python3 >/dev/null; then   # well-formed, with the coordinates
  python3 - "$work/pom.xml" "$version" <<'PY'
import sys, xml.etree.ElementTree as ET
ns = {"m": "http://maven.apache.org/POM/4.0.0"}
root = ET.parse(sys.argv[1]).getroot()
got = tuple(root.find("m:" + k, ns).text for k in ("groupId", "artifactId", "version"))
if got != ("org.shardopt", "shardopt", sys.argv[2]):
    sys.exit("build-jar: pom coordinates %s" % (got,))
PY
fi
mkdir -p "$work/classes/META-INF/maven/org.shardopt/shardopt"
cp "$work/pom.xml" "$work/classes/META-INF/maven/org.shardopt/shardopt/pom.xml"
printf 'groupId=org.shardopt\nartifactId=shardopt\nversion=%s\n' "$version" \
  > "$work/classes/META-INF/maven/org.shardopt/shardopt/pom.properties"
cat > "$work/MANIFEST.MF" <<MF
Implementation-Title: shardopt
Implementation-Vendor: shardopt
Implementation-Version: $version
Automatic-Module-Name: org.shardopt
Shardopt-Native-Platform: linux-x86_64
Shardopt-Native-Requires: $requires
Shardopt-Native-Debian-Packages: $debs
MF
out=$dist/shardopt-$version.jar
rm -f "$out"
jar cfm "$out" "$work/MANIFEST.MF" -C "$work/classes" .
cp "$work/pom.xml" "$dist/shardopt-$version.pom"
echo "$out  $(stat -c %s "$out") bytes (natives need: $requires; Debian: $debs)"
echo "$dist/shardopt-$version.pom"
