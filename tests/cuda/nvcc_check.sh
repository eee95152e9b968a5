#!/bin/sh
# nvcc_check.sh PRIMEC NVCC INCLUDE WORK FILE... — the .cu of every model
# and run of each FILE compiles with nvcc, warnings as errors, for sm_80
# and sm_90. nvcc is slow, so one call compiles them all: each .cu is
# included in a namespace of its own, FILE_MODEL (the headers it includes
# come first, outside, so that their guards keep them there).
set -u
primec=$1 nvcc=$2 include=$3 work=$4
shift 4
here=$(dirname "$0")
mkdir -p "$work" || exit 1
all=$work/all.cu
printf '#include <cublas_v2.h>\n#include <cuda_runtime.h>\n#include <math.h>\n\n#include "prime_cuda_math.cuh"\n\n' >"$all"
count=0
for file in "$@"; do
    models=$(sh "$here/runs.sh" "$primec" "$file") || exit 1
    [ -n "$models" ] || { echo "FAIL: no model in $file"; exit 1; }
    base=$(basename "$file" .prime)
    mkdir -p "$work/$base" || exit 1
    "$primec" build "$file" --target cuda --emit-only -o "$work/$base" >/dev/null || exit 1
    for m in $models; do
        [ -f "$work/$base/$m.cu" ] || { echo "FAIL: no $base/$m.cu"; exit 1; }
        printf 'namespace %s_%s {\n#include "%s/%s.cu"\n}\n' "$base" "$m" "$base" "$m" >>"$all"
        count=$((count + 1))
    done
done
"$nvcc" -c -O2 -Werror all-warnings -gencode arch=compute_80,code=sm_80 \
    -gencode arch=compute_90,code=sm_90 -I"$include" -I"$work" "$all" -o "$work/all.o" || {
    echo "FAIL: nvcc rejected the kernels of $*"
    exit 1
}
echo "nvcc: PASS ($count models and runs of $*)"
