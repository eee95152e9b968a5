#!/usr/bin/env bash
# run.sh — the bounded fuzz run of CI (docs/fuzzing.md).
#
#   tests/fuzz/run.sh [BUILD_DIR [SECONDS]]     (defaults: build-fuzz 90)
#
# Configures and builds the libFuzzer target with clang (ASan + UBSan,
# -DPRIMEC_FUZZ=ON) in BUILD_DIR, runs the fuzz ctests (the committed
# corpus, through the libFuzzer binary and the replayer), then fuzzes for
# SECONDS from a scratch copy of tests/fuzz/corpus (the committed corpus
# is never rewritten). Exits 1 on any finding: a crash, a sanitizer
# report, an internal compiler error, a leak, an input slower than 20 s
# (in this sanitized build) or above 2 GiB; the log then shows the input's program
# (prime_fuzz_replay --print) and where the input was saved.
# Run from anywhere; needs clang (Debian's ships libFuzzer).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-build-fuzz}
seconds=${2:-90}
case $build in
/*) ;;
*) build=$root/$build ;;
esac
jobs=$(nproc 2>/dev/null || echo 2)

if ! command -v clang >/dev/null; then
    echo "fuzz: clang not found; install it (apt-get install clang) to fuzz" >&2
    exit 1
fi

CC=clang cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Debug -DPRIMEC_SANITIZE=ON \
    -DPRIMEC_FUZZ=ON >/dev/null
cmake --build "$build" -j"$jobs" --target prime_fuzz prime_fuzz_replay
ctest --test-dir "$build" --output-on-failure -R '^fuzz/'

work=$build/fuzz-run
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
cp "$root"/tests/fuzz/corpus/* "$work/corpus/"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
"$build/tests/prime_fuzz" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
    -max_len=1024 -len_control=0 -report_slow_units=20 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "$work/corpus" >"$work/log" 2>&1 || status=$?
grep -E '^(INFO: Seed|#[0-9]+ +DONE|stat::|fuzz_model:)' "$work/log" || true
if [[ $status -ne 0 ]] || compgen -G "$work/artifacts/*" >/dev/null; then
    echo "fuzz: FINDING (exit $status); the last lines of the log:" >&2
    tail -n 60 "$work/log" >&2
    for a in "$work"/artifacts/*; do
        [[ -f $a ]] || continue
        echo "fuzz: input $a decodes to:" >&2
        "$build/tests/prime_fuzz_replay" --print "$a" >&2 || true
    done
    exit 1
fi
echo "fuzz: no finding in ${seconds}s"
