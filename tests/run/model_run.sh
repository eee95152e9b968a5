#!/bin/sh
# model_run.sh MODE PRIMEC FILE MODEL DIR [MPIEXEC...]
#
# One run test of one model of an example file (tests/layers.cmake):
#   d1    the model on one device: its `mesh(d: 4)` becomes `mesh(d: 1)`
#   mpi   built with --target mpi and run as 4 MPI processes; mpi:N as N
#   plan  `primec plan` chooses its partitions (-o planned.prime), and the
#         planned model is built and run; plan:LIMIT plans under
#         --memory-limit LIMIT, plan:LIMIT:MESH also on --mesh MESH,
#         plan:LIMIT:MESH:N on N devices (N / MESH data-parallel replicas). The bytes `primec plan --json` reports for
#         the plan scheduled as one program must equal the built program's
#         predicted (and, by --check, counted) bytes on the busiest device.
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
nproc=4
case $mode in
d1)
    sed 's/mesh(d: 4);/mesh(d: 1);/' "$file" >"$dir/model.prime" || fail "cannot copy $file"
    file=$dir/model.prime
    ;;
mpi | mpi:*)
    target=mpi
    [ "$mode" = mpi ] || nproc=${mode#mpi:}
    ;;
plan | plan:*)
    limit=
    case $mode in
    plan:*:*:*)
        rest=${mode#plan:}
        devices=${rest##*:}
        rest=${rest%:*}
        limit="--memory-limit ${rest%%:*} --mesh ${rest#*:} --devices $devices"
        ;;
    plan:*:*)
        rest=${mode#plan:}
        limit="--memory-limit ${rest%%:*} --mesh ${rest#*:}"
        ;;
    plan:*) limit="--memory-limit ${mode#plan:}" ;;
    esac
    # shellcheck disable=SC2086
    "$primec" plan "$file" --model "$model" --profile v100 $limit --json -o "$dir/planned.prime" \
        >"$dir/plan.out" || { cat "$dir/plan.out"; fail "primec plan"; }
    # The JSON carries the same plan as the file -o writes.
    python3 -c 'import json, sys; sys.stdout.write(json.load(open(sys.argv[1]))["planned_source"])' \
        "$dir/plan.out" >"$dir/from_json.prime" || fail "no planned_source in the JSON"
    cmp -s "$dir/from_json.prime" "$dir/planned.prime" || fail "the JSON's plan differs from -o's"
    cat "$dir/plan.out"
    file=$dir/planned.prime
    model=${model}_planned
    ;;
*)
    fail "unknown mode '$mode'"
    ;;
esac
exe=$("$primec" build "$file" --model "$model" --target "$target" -o "$dir/bin") || fail "primec build"
if [ "$target" = mpi ]; then
    "$@" -np "$nproc" "$exe" --check >"$dir/run.out" 2>&1
else
    "$exe" --check >"$dir/run.out" 2>&1
fi
rc=$?
cat "$dir/run.out"
[ "$rc" -eq 0 ] || fail "$exe --check exited with $rc"
grep -q "^check passed$" "$dir/run.out" || fail "no 'check passed'"
grep -q "counters equal the compiler's prediction" "$dir/run.out" || fail "counters differ from the prediction"
case $mode in
plan*)
    "$primec" explain "$file" --model "$model" --json >"$dir/explain.json" || fail "primec explain"
    python3 - "$dir/plan.out" "$dir/explain.json" <<'EOF' || fail "the plan's bytes differ from the program's"
import json, sys
plan = json.load(open(sys.argv[1]))["schedule"]
# The program is one data-parallel replica: the plan's collective bytes
# also count the gradient all-reduce across replicas.
plan_coll = plan["collective_bytes"] - plan["dp_collective_bytes"]
devs = json.load(open(sys.argv[2]))["per_device"]
coll = max(d["collective"] for d in devs)
p2p = max(d["shift"] + d["redist"] for d in devs)
print("plan: collective %d (+%d data-parallel), p2p %d; program: collective %d, p2p %d"
      % (plan_coll, plan["dp_collective_bytes"], plan["p2p_bytes"], coll, p2p))
sys.exit(0 if (plan_coll, plan["p2p_bytes"]) == (coll, p2p) else 1)
EOF
    ;;
esac
echo PASS
