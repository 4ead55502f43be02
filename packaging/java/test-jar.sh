#!/usr/bin/env bash
# ctest packaging.jar: builds the jar (build-jar.sh), copies only the jar into an empty directory,
# compiles JarConsumer.java (and the demo model, samples/java/MlpDemo.java) against it with javac and runs it with `java -cp shardopt.jar:.` on 2
# in-memory ranks, then as 2 UCX processes (tools/shardopt-run), in an environment holding nothing else (env -i: PATH=/usr/bin:/bin, no
# CLASSPATH, no LD_LIBRARY_PATH; the program checks its natives came from the jar).
# Exit 77 (skipped) when the JDK is missing or the build has no Java binding.
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
for tool in javac java jar; do
  command -v $tool >/dev/null || { echo "SKIP: $tool missing (apt-get install default-jdk-headless)"; exit 77; }
done
targets=$(cmake --build "$build" --target help)
if ! grep -q shardopt_jar <<<"$targets"; then
  echo "SKIP: $build has no Java binding (target shardopt_jar)"; exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/shardopt-jar.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$here/build-jar.sh" "$build" "$tmp/dist"
mkdir -p "$tmp/empty" "$tmp/home" "$tmp/javatmp"
cp "$tmp"/dist/shardopt-*.jar "$tmp/empty/shardopt.jar"
cp "$here/consumer/JarConsumer.java" "$src/samples/java/MlpDemo.java" "$tmp/empty/" # the demo model is a sample
cd "$tmp/empty"
echo "== $(ls)"
clean=(env -i PATH=/usr/bin:/bin HOME="$tmp/home" LANG=C.UTF-8)
"${clean[@]}" javac -d . -cp shardopt.jar JarConsumer.java MlpDemo.java
"${clean[@]}" java -Djava.io.tmpdir="$tmp/javatmp" -cp shardopt.jar:. JarConsumer
echo "== 2 UCX processes: shardopt-run -n 2 -- java -cp shardopt.jar:. JarConsumer ucx"
if command -v python3 >/dev/null; then
  "${clean[@]}" python3 "$src/tools/shardopt-run" -n 2 --timeout 90 -- \
    java -Xmx256m -Djava.io.tmpdir="$tmp/javatmp" -cp shardopt.jar:. JarConsumer ucx
else
  echo "   (python3 missing: the UCX run is left out)"
fi
unzip -p shardopt.jar META-INF/MANIFEST.MF 2>/dev/null | grep Shardopt-Native || true
echo "PASS: the jar alone compiled and ran a 2-rank program"
