#!/bin/sh
# program_cli.sh PRIMEC MODEL.prime DIR
#
# The command line of a built program (tests/hang.cmake): every numeric
# option is validated (exit 2 with the reason), options without a value
# are named, --json and --trace paths are checked before the run (exit 2
# with the reason and no report), and write errors exit 2. Prints PASS or
# FAIL with the reason last.
set -u
primec=$1 model=$2 dir=$3

fail() {
    echo "FAIL: $*"
    exit 1
}

mkdir -p "$dir" || fail "cannot create $dir"
exe=$("$primec" build "$model" --target cpu -o "$dir") || fail "primec build"
name=$(basename "$exe")

# expect RC 'TEXT' ARGS...: exit RC, TEXT on stderr, nothing on stdout
# unless RC is 0 or report=1 (a write error after the run).
report=0
expect() {
    want=$1 text=$2
    shift 2
    "$exe" "$@" >"$dir/out" 2>"$dir/err"
    rc=$?
    [ "$rc" -eq "$want" ] || { cat "$dir/out" "$dir/err"; fail "'$*' exited $rc, not $want"; }
    [ -z "$text" ] || grep -qF -- "$text" "$dir/err" || { cat "$dir/err"; fail "'$*' did not say: $text"; }
    if [ "$want" -ne 0 ] && [ "$report" -eq 0 ] && [ -s "$dir/out" ]; then
        cat "$dir/out"
        fail "'$*' printed a report"
    fi
}

expect 2 "$name: --seed needs an integer from 0 to 18446744073709551615, not 'abc'" --seed abc
expect 2 "--seed needs an integer" --seed -1
expect 2 "--seed needs an integer" --seed 18446744073709551616
expect 2 "--seed needs an integer" --seed 12x
expect 2 "$name: --repeat needs an integer from 1 to 2147483647, not '-1'" --repeat -1
expect 2 "--repeat needs an integer from 1 to 2147483647, not 'abc'" --repeat abc
expect 2 "--repeat needs an integer from 1 to 2147483647, not '0'" --repeat 0
expect 2 "--repeat needs an integer from 1 to 2147483647, not '3000000000'" --repeat 3000000000
expect 2 "$name: --timeout needs a number of seconds from 0 (no deadline) to 1e+09, not 'x'" --timeout x
expect 2 "--timeout needs a number of seconds" --timeout -1
expect 2 "--timeout needs a number of seconds" --timeout inf
expect 2 "--timeout needs a number of seconds" --timeout nan
expect 2 "--timeout needs a number of seconds" --timeout 0x10
expect 2 "--timeout needs a number of seconds" --timeout ""
expect 2 "$name: option '--seed' needs a value" --check --seed
expect 2 "$name: option '--timeout' needs a value" --timeout
expect 2 "$name: option '--json' needs a file name" --json ""
expect 2 "$name: unknown option '--bogus'" --bogus
expect 2 "$name: cannot write '$dir/missing/run.json': No such file or directory" --check --json "$dir/missing/run.json"
expect 2 "$name: cannot write '$dir/missing/trace.json': No such file or directory" --check --trace "$dir/missing/trace.json"
expect 2 "$name: cannot write '$dir': Is a directory" --json "$dir"
expect 0 "" --help

# Write errors: the report, the --json file and the trace on a full disk.
if [ -w /dev/full ]; then
    "$exe" --check >/dev/full 2>"$dir/err"
    rc=$?
    [ "$rc" -eq 2 ] || fail "a report to /dev/full exited $rc, not 2"
    grep -qF "$name: cannot write the report: No space left on device" "$dir/err" || { cat "$dir/err"; fail "no reason for the report's write error"; }
    report=1
    expect 2 "$name: cannot write '/dev/full': No space left on device" --json /dev/full
    expect 2 "$name: cannot write trace '/dev/full': No space left on device" --trace /dev/full
    report=0
else
    echo "note: no writable /dev/full, write errors not tested"
fi

# Good values run.
expect 0 "" --check --seed 18446744073709551615 --repeat 2 --timeout 2.5 --json "$dir/ok.json" --trace "$dir/trace.json"
grep -q "check passed" "$dir/out" || fail "no 'check passed'"
grep -q '"counters_match_prediction": true' "$dir/ok.json" || fail "--json lacks the counters"
grep -q '"traceEvents"' "$dir/trace.json" || fail "--trace wrote no timeline"
expect 0 "" --check --timeout 0 --seed 0
echo "PASS: numeric options, output paths and write errors of a built program"
