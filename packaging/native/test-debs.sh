#!/usr/bin/env bash
# ctest packaging.debs: builds libshardopt2 + libshardopt-dev + shardopt-tools (build-debs.sh), installs them into
# a clean prefix and builds consumers outside the tree from the installed files only:
#   - a C program with `pkg-config shardopt-c`, run on 2 in-process ranks and on 2 UCX
#     processes (tools/shardopt-run);
#   - a C++ program with `pkg-config shardopt` (the static core), on 2 in-process ranks;
#   - a CMake C++ project with find_package(shardopt) (the static C++ core, and the C ABI),
#     each run on 2 in-process ranks.
# Install: as root with $CI or $SHARDOPT_TEST_APT=1 set, `apt-get install ./dist/*.deb` (purged
# afterwards); otherwise `dpkg-deb -x` into a temporary root, used through PKG_CONFIG_SYSROOT_DIR,
# CMAKE_PREFIX_PATH and LD_LIBRARY_PATH (and `apt-get install -s` checks the dependencies).
# Exit 77 (skipped) when a tool is missing.
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
for tool in cpack dpkg-deb dpkg-shlibdeps file pkg-config cc c++ cmake python3; do
  command -v $tool >/dev/null || { echo "SKIP: $tool missing (apt-get install dpkg-dev file pkgconf build-essential cmake python3)"; exit 77; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/shardopt-debs.XXXXXX")
apt_installed=0
cleanup() {
  if [ $apt_installed = 1 ]; then apt-get purge -y -qq shardopt-tools libshardopt-dev "libshardopt*" >/dev/null 2>&1 || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

"$here/build-debs.sh" "$build" "$tmp/dist"
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
mkdir -p "$tmp/consumer"; cp -r "$here/consumer/." "$tmp/consumer/"
cd "$tmp"

if [ "$(id -u)" = 0 ] && [ -n "${CI:-}${SHARDOPT_TEST_APT:-}" ]; then
  echo "== apt-get install ./dist/*.deb"
  apt_installed=1
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ./dist/*.deb
  root=/
  prefix=/usr
  pcenv=(env PKG_CONFIG_PATH=)
  cmake_prefix=()
  unset LD_LIBRARY_PATH
else
  echo "== dpkg-deb -x into $tmp/root (not root, or neither CI nor SHARDOPT_TEST_APT set)"
  for deb in dist/*.deb; do dpkg-deb -x "$deb" root; done
  if command -v apt-get >/dev/null; then
    apt-get install -s ./dist/*.deb >apt-s.log 2>&1 || { cat apt-s.log; echo "FAIL: the packages' dependencies do not resolve"; exit 1; }
    grep -q "Inst libshardopt-dev" apt-s.log || { cat apt-s.log; exit 1; }
  fi
  root=$tmp/root
  prefix=$root/usr
  # pkg-config sees only the clean root (its paths prefixed with it)
  pcenv=(env PKG_CONFIG_SYSROOT_DIR="$root" PKG_CONFIG_LIBDIR="$root/usr/lib/$arch/pkgconfig" PKG_CONFIG_PATH=)
  cmake_prefix=(-DCMAKE_PREFIX_PATH="$prefix")
  export LD_LIBRARY_PATH=$root/usr/lib/$arch
fi
echo "== the packages' files"
for deb in dist/*.deb; do echo "$(basename "$deb"):"; dpkg-deb -c "$deb" | awk '{print "    " $6 $7 $8}'; done
if grep -rlI -e "$build" -e "$src" "$root/usr/lib/$arch/cmake/shardopt" "$root/usr/lib/$arch/pkgconfig"/shardopt*.pc; then
  echo "FAIL: the installed files name the build or source tree"; exit 1
fi
if readelf -d "$root/usr/lib/$arch/libshardopt.so.2" | grep -E "RPATH|RUNPATH"; then
  echo "FAIL: libshardopt.so.2 has an RPATH"; exit 1
fi

echo "== C: cc consumer.c \$(pkg-config --cflags --libs shardopt-c)"
flags=$("${pcenv[@]}" pkg-config --cflags --libs shardopt-c)
echo "   pkg-config shardopt-c: $flags"
cc -O2 -o c-consumer consumer/c/consumer.c $flags -lpthread -lm
lib=$(ldd ./c-consumer | grep libshardopt.so.2); echo "$lib"
check_installed() {  # the library a program loads must be the installed one (merged /usr: /lib = /usr/lib)
  local got; got=$(ldd "$1" | awk '$1 == "libshardopt.so.2" {print $3}')
  [ -n "$got" ] && [ "$(readlink -f "$got")" = "$(readlink -f "${root%/}/usr/lib/$arch/libshardopt.so.2")" ] ||
    { echo "FAIL: $1 loads libshardopt.so.2 from '$got', not from the installed package"; exit 1; }
}
check_installed ./c-consumer
./c-consumer
# shardopt-tools: the installed launcher (through /usr/bin/shardopt-run when installed by apt; in an extracted root
# the script itself, as that wrapper runs it), then the checkpoint tool and the planner.
if [ "$root" = / ]; then launch=(shardopt-run); else launch=(python3 "$root/usr/lib/shardopt/tools/shardopt-run"); fi
echo "== C: 2 UCX processes (the installed shardopt-run -n 2 -- ./c-consumer ucx ckpt), saving a sharded checkpoint"
"${launch[@]}" -n 2 --timeout 60 -- ./c-consumer ucx "$tmp/ckpt"
echo "== shardopt-ckpt verify / inspect the job's checkpoint"
"$root/usr/bin/shardopt-ckpt" verify "$tmp/ckpt" | tee ckpt.log
grep -q "world size 2" ckpt.log || { echo "FAIL: shardopt-ckpt verify does not show the job's 2 ranks"; exit 1; }
"$root/usr/bin/shardopt-ckpt" inspect "$tmp/ckpt" >inspect.json
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["world_size"] == 2 and d["step_count"] == 200, d' inspect.json
echo "== shardopt-plan --params 7B --hosts 1 --gpus-per-host 8 --gpu-memory 80GiB"
"$root/usr/bin/shardopt-plan" --params 7B --hosts 1 --gpus-per-host 8 --gpu-memory 80GiB | tee plan.log
grep -qE "^fsdp +yes" plan.log || { echo "FAIL: shardopt-plan found no FSDP plan that fits"; exit 1; }

echo "== C++: c++ consumer.cpp \$(pkg-config --cflags --libs shardopt) (the static core)"
flags=$("${pcenv[@]}" pkg-config --cflags --libs shardopt)
echo "   pkg-config shardopt: $flags"
c++ -std=c++17 -O2 -o cpp-pc-consumer consumer/cmake/consumer.cpp $flags
./cpp-pc-consumer

echo "== C++: find_package(shardopt)"
cmake -S consumer/cmake -B cmake-build -DCMAKE_BUILD_TYPE=Release "${cmake_prefix[@]}" >cmake.log 2>&1 || { cat cmake.log; exit 1; }
grep -q "shardopt_DIR:PATH=$prefix/lib/$arch/cmake/shardopt" cmake-build/CMakeCache.txt ||
  { grep shardopt_DIR cmake-build/CMakeCache.txt; echo "FAIL: find_package found another shardopt"; exit 1; }
cmake --build cmake-build -j "${JOBS:-2}" >build.log 2>&1 || { cat build.log; exit 1; }
ldd cmake-build/consumer_capi | grep shardopt
check_installed cmake-build/consumer_capi
cmake-build/consumer_cpp
cmake-build/consumer_capi
echo "PASS: libshardopt2, libshardopt-dev and shardopt-tools installed in a clean prefix; C (pkg-config) and C++ (find_package) consumers ran on 2 ranks; the installed launcher, checkpoint tool and planner ran"
