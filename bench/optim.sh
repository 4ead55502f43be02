#!/usr/bin/env bash
# CPU optimizer-update benchmark: f32 Adam at 16M/64M/256M parameters on 1 and 2 threads
# against the plain copy bandwidth measured in the same run. Extra args go to bench_optim
# (--sizes 16,64 in Mi-parameters, --threads 1,2,4). Called by ./dev bench optim with BUILD set.
set -euo pipefail
BUILD=${BUILD:-$(cd "$(dirname "$0")/.." && pwd)/build}
exec "$BUILD/bench/bench_optim" "$@"
