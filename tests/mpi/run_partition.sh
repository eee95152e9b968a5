#!/bin/sh
# run_partition.sh PRIMEC MODEL.prime DIR NP MPIEXEC [MPIEXEC_FLAG...]
#
# One MPI run test (tests/mpi.cmake): builds MODEL.prime twice from the
# same emitted C, with `primec build --target mpi` and `--target cpu`,
# runs the MPI program as NP processes with --check, and requires exit 0,
# "counters equal the compiler's prediction", "check passed", a report
# printed once (by the root only) with its time report, and a report
# byte-identical to the threads run's but for the times. Prints PASS or
# FAIL with the reason last.
set -u
primec=$1 model=$2 dir=$3 np=$4
shift 4

fail() {
    echo "FAIL: $*"
    exit 1
}

mkdir -p "$dir/mpi" "$dir/cpu" || fail "cannot create $dir"
exe=$("$primec" build "$model" --target mpi -o "$dir/mpi" 2>"$dir/mpi/build.err") ||
    { cat "$dir/mpi/build.err"; fail "primec build --target mpi"; }
[ -s "$dir/mpi/build.err" ] && { cat "$dir/mpi/build.err"; fail "primec build --target mpi wrote to stderr"; }
[ -x "$exe" ] || fail "primec build --target mpi printed '$exe', not an executable"
cpu=$("$primec" build "$model" --target cpu -o "$dir/cpu") || fail "primec build --target cpu"
cmp -s "$dir/mpi/$(basename "$exe").c" "$dir/cpu/$(basename "$cpu").c" ||
    fail "--target mpi and --target cpu emitted different C"

"$@" -np "$np" "$exe" --check >"$dir/mpi.out" 2>"$dir/mpi.err"
rc=$?
cat "$dir/mpi.out" "$dir/mpi.err"
[ "$rc" -eq 0 ] || fail "mpirun -np $np $exe --check exited with $rc"
grep -q "counters equal the compiler's prediction" "$dir/mpi.out" || fail "counters differ from the prediction"
grep -q "^check passed$" "$dir/mpi.out" || fail "no 'check passed'"
[ "$(grep -c "devices$" "$dir/mpi.out")" -eq 1 ] || fail "the report was not printed exactly once"

grep -q "^time per training step (median of 1 run)" "$dir/mpi.out" || fail "no time report"

# The time report (docs/timing.md) differs from run to run: it runs from
# its first line to the first check line.
untimed() {
    awk '/^time per training step/ { skip = 1 } /^check / { skip = 0 } !skip' "$1"
}
"$cpu" --check >"$dir/cpu.out" 2>&1 || fail "the threads build failed its check"
untimed "$dir/cpu.out" >"$dir/cpu.untimed"
untimed "$dir/mpi.out" >"$dir/mpi.untimed"
cmp -s "$dir/cpu.untimed" "$dir/mpi.untimed" || {
    diff "$dir/cpu.untimed" "$dir/mpi.untimed"
    fail "the MPI report differs from the threads report"
}
echo "PASS: $np MPI processes, report identical to the threads run"
