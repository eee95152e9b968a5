#!/bin/sh
# collectives.sh [BUILD_DIR] — the threads backend's all-reduce in shared
# memory (the default) against the ring of messages (PRIME_COLLECTIVES=ring),
# alternating, 4 devices, 4 KiB to 4 MiB (docs/timing.md).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
exe=$build/bench-collectives/allreduce
mkdir -p "$(dirname "$exe")"
# shellcheck disable=SC2046
cc -O2 -std=c11 -I"$root/runtime" "$root/bench/collectives/allreduce.c" \
    "$build/runtime/libprime_rt.a" $(pkg-config --libs openblas jansson) -lpthread -lm -o "$exe"
for n in 1024 65536 262144 1048576; do
    for round in 1 2 3; do
        printf 'shared memory: '
        "$exe" 4 "$n" 50
        printf 'ring:          '
        PRIME_COLLECTIVES=ring "$exe" 4 "$n" 50
    done
done
