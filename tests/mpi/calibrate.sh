#!/bin/sh
# calibrate.sh PRIMEC MODEL.prime DIR
#
# `primec calibrate --backend mpi` (tests/mpi.cmake):
#   - a quick calibration writes a profile named cpu-mpi that
#     `primec cost MODEL --profile FILE` accepts;
#   - errors: an mpiexec that does not exist (as a path and as a name not
#     in PATH) and a primec without primec-calibrate-mpi beside it are
#     usage errors (exit 2) that name what is missing; a launcher that
#     fails is exit 3 naming the run; --mpiexec without --backend mpi is a
#     usage error.
# Prints PASS or FAIL with the reason last.
set -u
primec=$1 model=$2 dir=$3

fail() {
    echo "FAIL: $*"
    exit 1
}

# expect RC TEXT CMD...: CMD exits with RC and says TEXT on stderr.
expect() {
    want=$1 text=$2
    shift 2
    "$@" >"$dir/out" 2>"$dir/err"
    rc=$?
    cat "$dir/err"
    [ "$rc" -eq "$want" ] || fail "$* exited with $rc, not $want"
    grep -qF -- "$text" "$dir/err" || fail "$* did not say '$text'"
}

rm -rf "$dir"
mkdir -p "$dir" || fail "cannot create $dir"

"$primec" calibrate --backend mpi --quick -o "$dir/mpi.profile" 2>"$dir/calibrate.err"
rc=$?
cat "$dir/calibrate.err"
[ "$rc" -eq 0 ] || fail "primec calibrate --backend mpi --quick exited with $rc"
grep -q "^name cpu-mpi$" "$dir/mpi.profile" || fail "the profile is not named cpu-mpi"
grep -q "^# Measured by \`primec calibrate --backend mpi\`" "$dir/mpi.profile" ||
    fail "the profile does not say how it was measured"
"$primec" cost "$model" --profile "$dir/mpi.profile" >"$dir/cost.out" || fail "primec cost refused the profile"
grep -q "with profile cpu-mpi" "$dir/cost.out" || fail "primec cost did not use the profile"

expect 2 "cannot find the MPI launcher '/nonexistent/mpiexec'" \
    "$primec" calibrate --backend mpi --quick --mpiexec /nonexistent/mpiexec
expect 2 "cannot find the MPI launcher 'mpiexec' in PATH" \
    env PATH="$dir/empty" "$primec" calibrate --backend mpi --quick
mkdir -p "$dir/alone" && cp "$primec" "$dir/alone/primec" &&
    cp "$(dirname "$primec")/primec-calibrate" "$dir/alone/primec-calibrate" ||
    fail "cannot copy primec and primec-calibrate"
expect 2 "cannot find the MPI calibration program '$dir/alone/primec-calibrate-mpi'" \
    "$dir/alone/primec" calibrate --backend mpi --quick
expect 3 "the MPI calibration run on 2 processes failed" \
    "$primec" calibrate --backend mpi --quick --mpiexec false
expect 2 "--mpiexec goes with --backend mpi" "$primec" calibrate --quick --mpiexec mpiexec
echo "PASS: primec calibrate --backend mpi"
