#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds a consumer against it twice: with
# find_package(shardopt) and with pkg-config. Usage: check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/tests/packaging" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
      -DCONSUMER_SOURCE="$src/tests/packaging/consumer.cpp" >/dev/null
cmake --build "$tmp/cmake-build" >/dev/null
out=$("$tmp/cmake-build/consumer")
[ "$out" = "sum=3" ] || { echo "find_package consumer printed '$out'"; exit 1; }
flags=$(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs shardopt)
# shellcheck disable=SC2086
g++ -std=c++17 "$src/tests/packaging/consumer.cpp" -o "$tmp/pc-consumer" $flags
out=$("$tmp/pc-consumer")
[ "$out" = "sum=3" ] || { echo "pkg-config consumer printed '$out'"; exit 1; }
echo "install package: find_package and pkg-config consumers both work"
