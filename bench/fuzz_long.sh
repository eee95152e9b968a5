#!/usr/bin/env bash
# fuzz_long.sh — a long structure-aware fuzz run and the figures of
# docs/fuzzing.md: executions, findings, and line/branch coverage of the
# analysis passes over the corpus the run grew.
#
#   bench/fuzz_long.sh [SECONDS [JOBS]]     (defaults: 3600, nproc)
#
# Builds build-fuzz (clang, ASan + UBSan, libFuzzer) and build-cov (clang,
# -fprofile-instr-generate -fcoverage-mapping, no sanitizers), fuzzes with
# JOBS processes (libFuzzer -fork) from tests/fuzz/corpus into
# build-fuzz/fuzz-long/corpus, keeps going after findings (they land in
# build-fuzz/fuzz-long/artifacts: crash-*, timeout-*, oom-*), then
# replays the grown corpus in build-cov and prints llvm-cov's report for
# resolve.c, partition.c, phases.c, schedule.c and sched_*.c.
#
# To refresh the committed seed corpus from a long run (review the diff):
#   build-fuzz/tests/prime_fuzz -merge=1 NEW build-fuzz/fuzz-long/corpus
#   (then replace tests/fuzz/corpus with NEW's smallest inputs)
# To turn a finding into a golden test:
#   build-fuzz/tests/prime_fuzz_replay --print ARTIFACT > tests/golden/check/NAME.prime
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-3600}
jobs=${2:-$(nproc 2>/dev/null || echo 2)}
fuzz=$root/build-fuzz
cov=$root/build-cov
work=$fuzz/fuzz-long

CC=clang cmake -S "$root" -B "$fuzz" -DCMAKE_BUILD_TYPE=Debug -DPRIMEC_SANITIZE=ON \
    -DPRIMEC_FUZZ=ON >/dev/null
cmake --build "$fuzz" -j"$jobs" --target prime_fuzz prime_fuzz_replay
CC=clang cmake -S "$root" -B "$cov" -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_FLAGS="-fprofile-instr-generate -fcoverage-mapping" >/dev/null
cmake --build "$cov" -j"$jobs" --target prime_fuzz_replay

mkdir -p "$work/corpus" "$work/artifacts"
cp -n "$root"/tests/fuzz/corpus/* "$work/corpus/" 2>/dev/null || true

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
start=$(date +%s)
"$fuzz/tests/prime_fuzz" -fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=1024 -len_control=0 \
    -artifact_prefix="$work/artifacts/" "$work/corpus" >"$work/log" 2>&1 || true
end=$(date +%s)

# libFuzzer's fork mode reports running totals (#executions, coverage,
# corpus size, oom/timeout/crash counts): the last such line has them.
last=$(grep -E '^#[0-9]+: cov:' "$work/log" | tail -n 1 || true)
echo "fuzz: $((end - start)) s with $jobs jobs; last status: ${last:-none}"
echo "fuzz: findings: $(find "$work/artifacts" -type f | wc -l) in $work/artifacts"
find "$work/artifacts" -type f -printf '  %f\n'

# How far the grown corpus gets, and the coverage of the analysis passes.
rm -f "$work"/cov-*.profraw
LLVM_PROFILE_FILE="$work/cov-%p.profraw" "$cov/tests/prime_fuzz_replay" "$work/corpus" 2>&1 | tail -n 2
llvm-profdata merge -sparse "$work"/cov-*.profraw -o "$work/cov.profdata"
files=()
for f in resolve.c partition.c phases.c schedule.c; do
    files+=("$root/compiler/$f")
done
for f in "$root"/compiler/sched_*.c; do
    files+=("$f")
done
llvm-cov report "$cov/tests/prime_fuzz_replay" -instr-profile="$work/cov.profdata" "${files[@]}"
