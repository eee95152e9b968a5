#!/bin/sh
# dtype_check.sh PRIMEC CC CFLAGS INCLUDE LIB LINK WORK ROOT — --dtype bf16
# and f16 on the host emulation of the CUDA calls (LIB:
# libprime_rt_cuda_host.a), whose GEMMs round their operands as the .cu's
# cublasGemmEx calls do (runtime/pcu_host_gemm.c):
# - the square 2x2 matmul with bf16, and the small OPT layer with
#   Megatron-LM on 4 devices (opt_small_megatron) with f32, bf16 and f16,
#   pass --local --check, counters equal to the prediction, the narrow
#   runs naming their yardstick (the dense program with the same GEMMs);
# - the tolerance is not vacuous (tests/cuda/dtype_errors.py): every
#   tensor's bf16 and f16 error is past the bound the f32 build gives the
#   same tensor on the same data, bf16's worst error is above f16's, which
#   is above f32's; the f16 build whose device GEMMs round to bf16
#   instead (PCU_HOST_GEMM=bf16, a wrong result the size of the
#   difference between the two types) fails its check; and the bf16 build
#   whose device GEMMs are fp32 (PCU_HOST_GEMM=f32) is at fp32's error,
#   so the rounding the check measures is the device's.
set -u
primec=$1 cc=$2 cflags=$3 include=$4 lib=$5 link=$6 work=$7 root=$8
here=$(dirname "$0")
mkdir -p "$work" || exit 1
# build FILE MODEL DTYPE: WORK/MODEL-DTYPE/MODEL, the C part on LIB.
build() {
    dir=$work/$2-$3
    rm -rf "$dir"
    "$primec" build "$1" --model "$2" --target cuda --dtype "$3" --emit-only -o "$dir" \
        >/dev/null || { echo "FAIL: primec build $1 --model $2 --target cuda --dtype $3"; exit 1; }
    # shellcheck disable=SC2086
    $cc -std=c11 -O1 -Wall -Wextra -Werror $cflags -I"$include" "$dir/$2.c" -o "$dir/$2" \
        "$lib" $link || { echo "FAIL: $2.c (--dtype $3) does not build against $lib"; exit 1; }
}
# run MODEL DTYPE WANT [ENV]: --local --check --json, exit WANT (0 passes).
run() {
    dir=$work/$1-$2
    env ${4:+"$4"} "$dir/$1" --local --check --json "$dir/run.json" >"$dir/out.txt" 2>&1
    rc=$?
    if [ "$3" = 0 ]; then
        [ $rc -eq 0 ] && grep -q "^check passed" "$dir/out.txt" &&
            grep -q "^counters equal the compiler's prediction" "$dir/out.txt" ||
            { cat "$dir/out.txt"; echo "FAIL: $1 --dtype $2 ${4:-} --check: exit $rc"; exit 1; }
    else
        [ $rc -eq "$3" ] && grep -q "^check FAILED" "$dir/out.txt" ||
            { cat "$dir/out.txt"; echo "FAIL: $1 --dtype $2 ${4:-}: exit $rc, not a failed check"; exit 1; }
    fi
    if [ "$2" != f32 ] && ! grep -q "^check: GEMM operands in $2, fp32 accumulation" "$dir/out.txt"; then
        cat "$dir/out.txt"
        echo "FAIL: $1 --dtype $2 does not name its yardstick"
        exit 1
    fi
}
build "$root/tests/golden/emit/square-2x2.prime" m bf16
run m bf16 0
opt=opt_small_megatron
for d in f32 bf16 f16; do
    build "$root/examples/opt_layer.prime" $opt $d
    run $opt $d 0
    cp "$work/$opt-$d/run.json" "$work/$d.json"
done
python3 "$here/dtype_errors.py" "$work/f32.json" "$work/bf16.json" "$work/f16.json" || exit 1
run $opt f16 1 PCU_HOST_GEMM=bf16
run $opt bf16 0 PCU_HOST_GEMM=f32
python3 "$here/dtype_errors.py" --device-f32 "$work/$opt-bf16/run.json" || exit 1
echo "dtype host: PASS (square 2x2 bf16; $opt f32, bf16, f16; wrong device GEMMs fail)"
