# plan_write_lib.sh — shared by the stages_plan_write*.sh tests (sourced):
# fail, and built_check DIR FILE MODEL (build the written plan and run it
# with --check on the cpu backend: the check passes and the counters
# equal the compiler's prediction).
fail() {
    echo "FAIL: $*"
    exit 1
}

built_check() {
    "$primec" build "$2" --model "$3" -o "$1/out" >"$1/build.out" 2>&1 ||
        fail "the written plan does not build: $(tail -3 "$1/build.out")"
    "$1/out/$3" --check >"$1/run.out" 2>&1 || fail "--check failed: $(tail -3 "$1/run.out")"
    grep -q "check passed" "$1/run.out" || fail "no 'check passed'"
    grep -q "counters equal the compiler's prediction" "$1/run.out" ||
        fail "the counters differ from the prediction"
}
