#!/bin/sh
# dtype_nvcc.sh PRIMEC NVCC INCLUDE WORK FILE MODEL [--link CC CFLAGS LIB LINK] —
# MODEL of FILE built with --target cuda --dtype bf16 and --dtype f16: both
# .cu files compile with nvcc in one call (each in a namespace of its own,
# its prime_cuda_run_phase renamed, as tests/cuda/nvcc_check.sh does),
# warnings as errors, for sm_80 and sm_90; the bf16 .cu must call
# cublasGemmEx or cublasGemmStridedBatchedEx only, with CUDA_R_16BF
# operands (the f16 one CUDA_R_16F), and no fp32 cuBLAS GEMM. With --link,
# each C part is linked with that object, LIB (libprime_rt_cuda.a) and
# LINK, and started with --local --check: without a GPU it must say "no
# CUDA device" and exit 2; with one, pass its check.
set -u
primec=$1 nvcc=$2 include=$3 work=$4 file=$5 model=$6
shift 6
link_cc= link_cflags= link_lib= link_flags=
if [ "${1:-}" = --link ]; then
    link_cc=$2 link_cflags=$3 link_lib=$4 link_flags=$5
fi
mkdir -p "$work" || exit 1
all=$work/all.cu
printf '#include <cublas_v2.h>\n#include <cuda_runtime.h>\n#include <math.h>\n\n#include "prime_cuda.h"\n#include "prime_cuda_math.cuh"\n\n' >"$all"
for d in bf16 f16; do
    rm -rf "$work/$d"
    "$primec" build "$file" --model "$model" --target cuda --dtype $d --emit-only -o "$work/$d" \
        >/dev/null || { echo "FAIL: primec build --dtype $d"; exit 1; }
    cu=$work/$d/$model.cu
    type=CUDA_R_16BF
    [ $d = f16 ] && type=CUDA_R_16F
    gemms=$(grep -c 'cublasGemm\(StridedBatched\)\?Ex(' "$cu")
    # The program is clang-formatted: an argument list may wrap, so the
    # operands are counted over the text joined into one line.
    typed=$(tr -s '\n ' '  ' <"$cu" | grep -o "n[ab][^,(]*, $type, " | wc -l)
    if [ "$gemms" -eq 0 ] || [ "$typed" -ne $((2 * gemms)) ] || grep -q cublasSgemm "$cu"; then
        echo "FAIL: $d: $gemms Ex GEMMs, $typed $type operands (two each), or an fp32 cublasSgemm"
        exit 1
    fi
    printf '#define prime_cuda_run_phase prime_cuda_run_phase_%s\nnamespace %s_%s {\n#include "%s/%s.cu"\n}\n#undef prime_cuda_run_phase\n' \
        $d $d "$model" $d "$model" >>"$all"
done
"$nvcc" -c -O0 -Xcicc -O0 -Xptxas -O0 -Werror all-warnings -gencode arch=compute_80,code=sm_80 \
    -gencode arch=compute_90,code=sm_90 -I"$include" -I"$work" "$all" -o "$work/all.o" || {
    echo "FAIL: nvcc rejected the bf16 or f16 kernels of $model"
    exit 1
}
linked=0
for d in bf16 f16; do
    [ -n "$link_cc" ] || break
    exe=$work/$d/$model
    # shellcheck disable=SC2086
    $link_cc -std=c11 -O1 -Wall -Wextra -Werror $link_cflags -I"$include" \
        -Dprime_cuda_run_phase=prime_cuda_run_phase_$d "$work/$d/$model.c" "$work/all.o" \
        "$link_lib" $link_flags -o "$exe" || { echo "FAIL: $d/$model.c does not link"; exit 1; }
    "$exe" --local --check >"$exe.out" 2>&1
    rc=$?
    if [ $rc -eq 2 ] && grep -q "^$model: no CUDA device: " "$exe.out"; then
        :
    elif [ $rc -eq 0 ] && grep -q "^check passed" "$exe.out"; then
        :
    else
        cat "$exe.out"
        echo "FAIL: $d/$model --local --check: exit $rc, neither 'no CUDA device' (2) nor a passed check"
        exit 1
    fi
    linked=$((linked + 1))
done
echo "nvcc dtype: PASS ($model with bf16 and f16 compiled for sm_80 and sm_90, $linked linked and started)"
