#!/bin/sh
# golden.sh check|update PRIMEC SRCROOT WORK FILE MODEL EXPECTED [DTYPE] —
# the .cu of `primec build FILE --model MODEL --target cuda --emit-only
# [--dtype DTYPE]` (run in SRCROOT with FILE relative to it, so that the
# comments' positions are stable) compared with EXPECTED, or written over
# it for review.
set -u
mode=$1 primec=$2 root=$3 work=$4 file=$5 model=$6 expected=$7 dtype=${8:-f32}
mkdir -p "$work" || exit 1
cd "$root" || exit 1
"$primec" build "$file" --model "$model" --target cuda --dtype "$dtype" --emit-only -o "$work" \
    >/dev/null || {
    echo "golden: primec build failed" >&2
    exit 1
}
if [ "$mode" = update ]; then
    cp "$work/$model.cu" "$expected" && echo "golden: updated $expected"
    exit
fi
diff -u "$expected" "$work/$model.cu" || {
    echo "golden: $model.cu differs from $expected (cmake --build BUILD --target update-golden-cuda)" >&2
    exit 1
}
echo "golden: $model.cu matches"
