#!/bin/sh
# hang_threads.sh PRIMEC MODEL.prime DIR
#
# A thread-device that stops answering (tests/hang.cmake): builds the
# model with `primec build --target cpu` and runs it with
# PRIME_FAULT=stall:1:3 (device 1 stops at its fourth communication call)
# and --timeout 1. The run must end with exit 4 within 5 s, no report on
# stdout, and messages naming the stalled rank and a rank that waited,
# with its phase, step and action. A --json file must say the run failed.
# Prints PASS or FAIL with the reason last.
set -u
primec=$1 model=$2 dir=$3

fail() {
    echo "FAIL: $*"
    exit 1
}

mkdir -p "$dir" || fail "cannot create $dir"
exe=$("$primec" build "$model" --target cpu -o "$dir") || fail "primec build"
start=$(date +%s%N)
PRIME_FAULT=stall:1:3 "$exe" --check --timeout 1 --json "$dir/run.json" >"$dir/out" 2>"$dir/err"
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
cat "$dir/out" "$dir/err"
echo "exit $rc after $ms ms"
[ "$rc" -eq 4 ] || fail "exit $rc, not 4"
[ "$ms" -lt 5000 ] || fail "took $ms ms with --timeout 1"
[ -s "$dir/out" ] && fail "a report was printed for a failed run"
grep -q "rank 1: stopped answering in phase '[^']*', step [0-9]*, action [0-9]* ([a-z_]*) (PRIME_FAULT=stall:1:3)" "$dir/err" ||
    fail "no message naming the stalled rank"
grep -q "rank [0-9]*: no answer within 1 s in phase '[^']*', step [0-9]*, action [0-9]* ([a-z_]*): \(receive from\|send to\) rank [0-9]* (tag [0-9]*) not completed" "$dir/err" ||
    fail "no message naming the rank that waited, its phase, step and action"
grep -q "run failed: timed out waiting for a peer (--timeout 1 s)" "$dir/err" || fail "no verdict"
grep -q '"error": "timed out waiting for a peer"' "$dir/run.json" || fail "--json does not say the run failed"

# The same program without the fault still passes, with any deadline.
"$exe" --check --timeout 0 >"$dir/ok.out" 2>&1 || { cat "$dir/ok.out"; fail "--timeout 0 run failed"; }
"$exe" --check --timeout 30 >"$dir/ok.out" 2>&1 || { cat "$dir/ok.out"; fail "--timeout 30 run failed"; }
echo "PASS: stalled device ended the run with exit 4 after $ms ms (--timeout 1)"
