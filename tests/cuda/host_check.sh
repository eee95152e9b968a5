#!/bin/sh
# host_check.sh PRIMEC CC CFLAGS INCLUDE LIB LINK WORK FILE — the CUDA
# table of device operations (runtime/prime_cuda.c) on the host emulation
# of its CUDA calls (LIB: libprime_rt_cuda_host.a, runtime/pcu_host.c):
# every run of FILE (of a layer file, its small Megatron, square-grid and
# sequence-parallel data-parallel runs) is emitted
# with --target cuda, its C part compiled against LIB, and run with
# --local --check, which must pass with the counters equal to the
# compiler's prediction. The first run with kernels fused across
# instances runs them as one call each (fewer kernel calls than its
# --no-fuse build, which passes too). The first run also checks the refusals of the
# CUDA program: no --local and no world, a GPU that is not there; its --save-grads
# (the same gradients as the cpu build's), --repeat, --json and --trace (its
# device row: tests/cuda/device_trace.py); and a failing CUDA call (emulated) at
# allocation, kernel and copy, which must end the run with exit 3 and a
# message naming the rank and the call, every device released.
set -u
primec=$1 cc=$2 cflags=$3 include=$4 lib=$5 link=$6 work=$7 file=$8
here=$(dirname "$0")
mkdir -p "$work" || exit 1
models=$(sh "$here/runs.sh" "$primec" "$file") || exit 1
count=0 first= fused=
for m in $models; do
    # A layer file's small runs of each kind: Megatron, the square grid,
    # sequence parallelism with data-parallel replicas (all-gather); the
    # other small runs schedule the same actions on other mesh sizes, and
    # the cpu backend's tests run them all (tests/models.cmake).
    case $(basename "$file") in
    matmul_*) ;;
    *) case $m in *_small_megatron | *_small_square | *_small_megatron_sp_dp | *_mlp_small | \
        opt_blocks_megatron) ;;
    *) continue ;; esac ;;
    esac
    dir=$work/$m
    rm -rf "$dir"
    "$primec" build "$file" --model "$m" --target cuda --emit-only -o "$dir" >/dev/null || {
        echo "FAIL: primec build --target cuda --emit-only $file --model $m"
        exit 1
    }
    # shellcheck disable=SC2086
    $cc -std=c11 -O1 -Wall -Wextra -Werror $cflags -I"$include" "$dir/$m.c" -o "$dir/$m" \
        "$lib" $link || { echo "FAIL: $m.c does not build against $lib"; exit 1; }
    "$dir/$m" --local --check >"$dir/out.txt" 2>&1
    rc=$?
    if [ $rc -ne 0 ] || ! grep -q "^check passed" "$dir/out.txt" ||
        ! grep -q "^counters equal the compiler's prediction" "$dir/out.txt"; then
        cat "$dir/out.txt"
        echo "FAIL: $m --local --check on the host emulation (exit $rc)"
        exit 1
    fi
    [ -n "$first" ] || first=$m
    [ -n "$fused" ] || ! grep -q "^static void fused" "$dir/$m.c" || fused=$m
    count=$((count + 1))
done
[ $count -gt 0 ] || { echo "FAIL: no run of $file"; exit 1; }

# kernel_calls JSON: the kernel calls of a --json report (timing.kernels).
kernel_calls() {
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["timing"]["kernels"])' "$1"
}
# The first run with kernels fused across instances runs them as one call
# each (the CUDA table's kernel_fused): fewer kernel calls than its
# --no-fuse build, which passes --check as well.
fusion="no fused kernels"
if [ -n "$fused" ]; then
    dir=$work/$fused nofuse=$work/nofuse-$fused
    rm -rf "$nofuse"
    "$primec" build "$file" --model "$fused" --target cuda --emit-only --no-fuse -o "$nofuse" \
        >/dev/null || { echo "FAIL: primec build --target cuda --no-fuse --model $fused"; exit 1; }
    ! grep -q "^static void fused" "$nofuse/$fused.c" || { echo "FAIL: --no-fuse fused"; exit 1; }
    # shellcheck disable=SC2086
    $cc -std=c11 -O1 -Wall -Wextra -Werror $cflags -I"$include" "$nofuse/$fused.c" \
        -o "$nofuse/$fused" "$lib" $link || { echo "FAIL: the --no-fuse $fused.c"; exit 1; }
    for d in "$dir" "$nofuse"; do
        "$d/$fused" --local --check --json "$d/run.json" >"$d/fused.txt" 2>&1 &&
            grep -q '"counters_match_prediction": true' "$d/run.json" &&
            grep -q "^check passed" "$d/fused.txt" ||
            { cat "$d/fused.txt"; echo "FAIL: $d/$fused --local --check --json"; exit 1; }
    done
    with=$(kernel_calls "$dir/run.json") without=$(kernel_calls "$nofuse/run.json")
    [ "$with" -lt "$without" ] ||
        { echo "FAIL: $fused: $with kernel calls fused, $without with --no-fuse"; exit 1; }
    fusion="$fused fused: $with kernel calls, $without with --no-fuse"
fi

# expect WHAT CODE TEXT ARGS...: the program exits with CODE saying TEXT
# (PCU_HOST_FAIL set to $inject when that is not empty).
inject=
expect() {
    what=$1 code=$2 text=$3
    shift 3
    env ${inject:+PCU_HOST_FAIL=$inject} "$work/$first/$first" "$@" >"$work/refusal.txt" 2>&1
    rc=$?
    if [ $rc -ne "$code" ] || ! grep -q "$text" "$work/refusal.txt"; then
        cat "$work/refusal.txt"
        echo "FAIL: $what: exit $rc, expected $code and '$text'"
        exit 1
    fi
}
expect "without --local" 2 "run one process per GPU, each with its RANK" --check
expect "--gpu 7" 2 "no CUDA device: --gpu 7, but 1 GPU" --local --gpu 7
expect "--gpu x" 2 "needs a GPU number" --local --gpu x
# --save-grads downloads the gradient tiles: the file equals the cpu
# build's of the same model (same seed) to fp32 rounding.
mkdir -p "$work/grads-cuda" "$work/grads-cpu"
expect "--save-grads" 0 "^counters equal" --local --save-grads "$work/grads-cuda"
"$primec" build "$file" --model "$first" -o "$work/cpu-$first" >/dev/null || {
    echo "FAIL: primec build $file --model $first"
    exit 1
}
"$work/cpu-$first/$first" --save-grads "$work/grads-cpu" >/dev/null || {
    echo "FAIL: the cpu build's --save-grads"
    exit 1
}
python3 "$here/same_grads.py" "$work/grads-cuda/grads.safetensors" "$work/grads-cpu/grads.safetensors" ||
    { echo "FAIL: --save-grads on the CUDA table differs from the cpu build's"; exit 1; }
expect "--help" 0 "CUDA options of" --help
expect "--repeat 2 --json --trace" 0 "^counters equal" --local --repeat 2 --json "$work/run.json" \
    --trace "$work/trace.json"
grep -q '"counters_match_prediction": true' "$work/run.json" || { echo "FAIL: --json"; exit 1; }
grep -q '"ph": *"X"' "$work/trace.json" || { echo "FAIL: --trace wrote no interval"; exit 1; }
# The device row: every kernel call as the device (here its emulation) timed it.
python3 "$here/device_trace.py" "$work/trace.json" || { echo "FAIL: --trace's device row"; exit 1; }
# A copy happens where a device sends anything (shift, collective, redistribution).
calls="alloc:3 kernel:1"
awk '$1 ~ /^[0-9]+$/ && $2 + $3 + $4 > 0 { moved = 1 } END { exit !moved }' \
    "$work/$first/out.txt" && calls="$calls copy:0"
for inject in $calls; do
    expect "PCU_HOST_FAIL=$inject" 3 "^$first: rank [0-9]*: .*emulated failure" \
        --local --check --timeout 30
    grep -q "run failed: a device call failed" "$work/refusal.txt" ||
        { cat "$work/refusal.txt"; echo "FAIL: PCU_HOST_FAIL=$inject: no verdict"; exit 1; }
done
inject=
echo "host: PASS ($count runs of $file on the host emulation; $fusion; refusals, options and failures ($calls) of $first)"
