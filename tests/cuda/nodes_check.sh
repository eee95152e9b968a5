#!/bin/sh
# nodes_check.sh PRIMEC WORK FILE — for every model and run of FILE, the C
# (--target cpu) and the CUDA (--target cuda) printings of the tile
# kernels come from the same kernel IR node by node: the sequences of
# `/* node K: ... */` comments (kernel_describe_node), function by
# function, of the C's kernelN functions and of the .cu's host functions
# phaseN must be equal, and not empty.
set -u
primec=$1 work=$2 file=$3
here=$(dirname "$0")
models=$(sh "$here/runs.sh" "$primec" "$file") || exit 1
[ -n "$models" ] || { echo "FAIL: no model in $file"; exit 1; }
total=0
for m in $models; do
    d=$work/$m
    mkdir -p "$d/c" "$d/cu" || exit 1
    "$primec" build "$file" --model "$m" --emit-only -o "$d/c" >/dev/null || exit 1
    "$primec" build "$file" --model "$m" --target cuda --emit-only -o "$d/cu" >/dev/null || exit 1
    awk '/^static void kernel[0-9]+\(/ {k = 1; print "function"} /^}/ {k = 0}
         k && /\/\* node [0-9]+:/ {sub(/^ */, ""); print}' "$d/c/$m.c" >"$d/c.nodes"
    awk '/^int phase[0-9]+\(/ {k = 1; print "function"} /^}/ {k = 0}
         k && /\/\* node [0-9]+:/ {sub(/^ */, ""); print}' "$d/cu/$m.cu" >"$d/cu.nodes"
    n=$(grep -c '^/\* node' "$d/c.nodes")
    if [ "$n" -eq 0 ]; then
        echo "FAIL: $m: no node comment in the C"
        exit 1
    fi
    if ! diff -u "$d/c.nodes" "$d/cu.nodes"; then
        echo "FAIL: $m: the C and CUDA kernels differ node by node"
        exit 1
    fi
    f=$(grep -c '^function' "$d/c.nodes")
    echo "$m: $f kernels, $n nodes: the same in C and CUDA"
    total=$((total + n))
done
echo "nodes: PASS ($total nodes)"
