#!/bin/sh
# nvcc_check.sh PRIMEC NVCC INCLUDE WORK [--link CC CFLAGS LIB LINK] FILE... — the
# .cu of every model and run of each FILE compiles with nvcc, warnings as
# errors, for sm_80 and sm_90. nvcc is slow, so one call compiles them
# all: each .cu is included in a namespace of its own, FILE_MODEL (the
# headers it includes come first, outside, so that their guards keep them
# there), its prime_cuda_run_phase renamed prime_cuda_run_phase_FILE_MODEL.
#
# With --link, every run's C part (M.c, the same name renamed; of a layer
# file, its small Megatron, square-grid and sequence-parallel
# data-parallel runs) is then
# compiled by CC (with CFLAGS: the sanitizers of a sanitizer build) and
# linked with that object, LIB (libprime_rt_cuda.a) and
# LINK (cuBLAS, the CUDA runtime, BLAS), and the program started with
# --local --check: without a GPU it must say "no CUDA device" and exit 2;
# with one, pass its check.
set -u
primec=$1 nvcc=$2 include=$3 work=$4
shift 4
link_cc= link_cflags= link_lib= link_flags=
if [ "${1:-}" = --link ]; then
    link_cc=$2 link_cflags=$3 link_lib=$4 link_flags=$5
    shift 5
fi
here=$(dirname "$0")
mkdir -p "$work" || exit 1
all=$work/all.cu
printf '#include <cublas_v2.h>\n#include <cuda_runtime.h>\n#include <math.h>\n\n#include "prime_cuda.h"\n#include "prime_cuda_math.cuh"\n\n' >"$all"
count=0
runs=
for file in "$@"; do
    models=$(sh "$here/runs.sh" "$primec" "$file") || exit 1
    [ -n "$models" ] || { echo "FAIL: no model in $file"; exit 1; }
    base=$(basename "$file" .prime)
    mkdir -p "$work/$base" || exit 1
    "$primec" build "$file" --target cuda --emit-only -o "$work/$base" >/dev/null || exit 1
    for m in $models; do
        [ -f "$work/$base/$m.cu" ] || { echo "FAIL: no $base/$m.cu"; exit 1; }
        printf '#define prime_cuda_run_phase prime_cuda_run_phase_%s_%s\nnamespace %s_%s {\n#include "%s/%s.cu"\n}\n#undef prime_cuda_run_phase\n' \
            "$base" "$m" "$base" "$m" "$base" "$m" >>"$all"
        runs="$runs $base/$m"
        count=$((count + 1))
    done
done
# The optimisers are off (host, NVVM and ptxas: 20 s instead of 75 s for a
# layer file's 16 models): what this checks is that nvcc accepts the code
# without a warning for both architectures; cuda/build-exe compiles with
# primec's own flags.
"$nvcc" -c -O0 -Xcicc -O0 -Xptxas -O0 -Werror all-warnings -gencode arch=compute_80,code=sm_80 \
    -gencode arch=compute_90,code=sm_90 -I"$include" -I"$work" "$all" -o "$work/all.o" || {
    echo "FAIL: nvcc rejected the kernels of $*"
    exit 1
}
linked=0
for run in $runs; do
    [ -n "$link_cc" ] || break
    base=${run%/*} m=${run#*/}
    # A layer file's small runs of each kind (as host_check.sh): the other
    # runs' C parts come from the same emitter on other mesh sizes, and
    # their kernels were compiled above.
    case $base in
    matmul_*) ;;
    *) case $m in *_small_megatron | *_small_square | *_small_megatron_sp_dp | *_mlp_small | \
        opt_blocks_megatron) ;;
    *) continue ;; esac ;;
    esac
    exe=$work/$base/$m
    # shellcheck disable=SC2086
    $link_cc -std=c11 -O1 -Wall -Wextra -Werror $link_cflags -I"$include" \
        -Dprime_cuda_run_phase=prime_cuda_run_phase_${base}_$m "$work/$base/$m.c" \
        "$work/all.o" "$link_lib" $link_flags -o "$exe" || {
        echo "FAIL: $base/$m.c does not link with its kernels and $link_lib"
        exit 1
    }
    "$exe" --local --check >"$exe.out" 2>&1
    rc=$?
    if [ $rc -eq 2 ] && grep -q "^$m: no CUDA device: " "$exe.out"; then
        :
    elif [ $rc -eq 0 ] && grep -q "^check passed" "$exe.out"; then
        :
    else
        cat "$exe.out"
        echo "FAIL: $base/$m --local --check: exit $rc, neither 'no CUDA device' (2) nor a passed check"
        exit 1
    fi
    linked=$((linked + 1))
done
if [ -n "$link_cc" ]; then
    echo "nvcc: PASS ($count models and runs of $* compiled, $linked linked and started)"
else
    echo "nvcc: PASS ($count models and runs of $*)"
fi
