#!/bin/sh
# nvcc_check.sh PRIMEC NVCC INCLUDE WORK FILE — the .cu of every model and
# run of FILE compiles with nvcc, warnings as errors, for sm_80 and sm_90.
# nvcc is slow, so one call compiles them all: each .cu is included in a
# namespace of its own (the headers it includes first, outside, so that
# their guards keep them there).
set -u
primec=$1 nvcc=$2 include=$3 work=$4 file=$5
here=$(dirname "$0")
models=$(sh "$here/runs.sh" "$primec" "$file") || exit 1
[ -n "$models" ] || { echo "FAIL: no model in $file"; exit 1; }
mkdir -p "$work" || exit 1
all=$work/all.cu
printf '#include <cublas_v2.h>\n#include <cuda_runtime.h>\n#include <math.h>\n\n#include "prime_cuda_math.cuh"\n\n' >"$all"
for m in $models; do
    "$primec" build "$file" --model "$m" --target cuda --emit-only -o "$work" >/dev/null || exit 1
    printf 'namespace %s {\n#include "%s.cu"\n}\n' "$m" "$m" >>"$all"
done
"$nvcc" -c -O2 -Werror all-warnings -gencode arch=compute_80,code=sm_80 \
    -gencode arch=compute_90,code=sm_90 -I"$include" -I"$work" "$all" -o "$work/all.o" || {
    echo "FAIL: nvcc rejected the kernels of $file"
    exit 1
}
echo "nvcc: PASS ($(echo $models | wc -w) models of $file)"
