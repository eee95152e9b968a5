#!/bin/sh
# model_run.sh MODE PRIMEC FILE MODEL DIR [MPIEXEC...]
#
# One run test of one model of an example file (tests/layers.cmake):
#   d1    the model on one device: its `mesh(d: 4)` becomes `mesh(d: 1)`
#   mpi   built with --target mpi and run as 4 MPI processes
#   plan  `primec plan` chooses its partitions (-o planned.prime), and the
#         planned model is built and run
# Each builds with `primec build --model`, runs `--check`, and requires
# exit 0, "check passed" and "counters equal the compiler's prediction".
set -u
mode=$1 primec=$2 file=$3 model=$4 dir=$5
shift 5

fail() {
    echo "FAIL: $*"
    exit 1
}

rm -rf "$dir"
mkdir -p "$dir" || fail "cannot create $dir"
target=cpu
case $mode in
d1)
    sed 's/mesh(d: 4);/mesh(d: 1);/' "$file" >"$dir/model.prime" || fail "cannot copy $file"
    file=$dir/model.prime
    ;;
mpi)
    target=mpi
    ;;
plan)
    "$primec" plan "$file" --model "$model" --profile v100 -o "$dir/planned.prime" >"$dir/plan.out" ||
        { cat "$dir/plan.out"; fail "primec plan"; }
    cat "$dir/plan.out"
    file=$dir/planned.prime
    model=${model}_planned
    ;;
*)
    fail "unknown mode '$mode'"
    ;;
esac
exe=$("$primec" build "$file" --model "$model" --target "$target" -o "$dir/bin") || fail "primec build"
if [ "$mode" = mpi ]; then
    "$@" -np 4 "$exe" --check >"$dir/run.out" 2>&1
else
    "$exe" --check >"$dir/run.out" 2>&1
fi
rc=$?
cat "$dir/run.out"
[ "$rc" -eq 0 ] || fail "$exe --check exited with $rc"
grep -q "^check passed$" "$dir/run.out" || fail "no 'check passed'"
grep -q "counters equal the compiler's prediction" "$dir/run.out" || fail "counters differ from the prediction"
echo PASS
