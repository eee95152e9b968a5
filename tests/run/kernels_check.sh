#!/bin/sh
# kernels_check.sh PRIMEC CASE.prime DIR WANT — builds a kernel lowering
# case (tests/golden/dump/kernels-*.prime, model m), runs it with --check
# (every tensor against the dense fp64 reference) and checks the emitted
# C: with WANT=gemm its tile kernels call the BLAS (prime_gemm or
# prime_gemm_batched) as many times as the kernel dump lists GEMM nodes
# over the distinct kernels, with WANT=loop they call none, and with
# WANT=rows they call none and a tile kernel sums into a row of double
# accumulators (double acc[N] with N > 8).
set -eu
primec=$1
case_file=$2
dir=$3
want=$4
mkdir -p "$dir"
"$primec" build "$case_file" -o "$dir"
"$dir/m" --check
# The tile kernels only (the references are printed from the same IR).
calls=$(awk '/^static void kernel[0-9]+\(/ {k = 1} /^}/ {k = 0} k && /prime_gemm/' "$dir/m.c" | wc -l)
nodes=$("$primec" check "$case_file" --dump-after=kernels | grep -c '^  gemm' || true)
echo "kernels: $calls BLAS calls in the tile kernels, $nodes GEMM nodes in the dump"
if [ "$want" = gemm ]; then
    [ "$calls" -gt 0 ] && [ "$nodes" -gt 0 ] || { echo "FAIL: no GEMM"; exit 1; }
elif [ "$want" = rows ]; then
    rows=$(awk '/^static void kernel[0-9]+\(/ {k = 1} /^}/ {k = 0} k && /double acc\[[0-9]+\] = \{0\.0\};/' "$dir/m.c" |
        sed 's/.*acc\[\([0-9]*\)\].*/\1/' | awk '$1 > 8' | wc -l)
    echo "kernels: $rows rows of accumulators"
    [ "$calls" -eq 0 ] && [ "$nodes" -eq 0 ] && [ "$rows" -gt 0 ] || { echo "FAIL: no row of accumulators"; exit 1; }
else
    [ "$calls" -eq 0 ] && [ "$nodes" -eq 0 ] || { echo "FAIL: unexpected GEMM"; exit 1; }
fi
echo "kernels: PASS"
