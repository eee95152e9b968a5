#!/bin/sh
# softmax_overflow.sh — up to which score magnitude does the causal softmax
# stay finite?
#
#   bench/softmax_overflow.sh PRIMEC [WORKDIR]
#
# bench/softmax/softmax_scaled.prime scales U(-1, 1) scores by SCALE and
# runs the causal softmax chain on them, in three forms: softmax_max (the
# stdlib's: subtract the row maximum, a max= reduction), softmax_premasked
# (the same through causal_mask and softmax_max) and softmax_bound
# (the stdlib's before: subtract 4 log sum exp(S / 4), computed by a sum).
# For each SCALE it builds each, runs `--check --init uniform` and prints
# the verdict and the largest error / bound over the checked tensors (pr
# and dx). Results are in docs/check.md.
set -u
primec=$1
work=${2:-/tmp/softmax_overflow}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
printf '%-10s %-18s %-9s %s\n' scale model verdict "worst error / bound"
for scale in 1 10 100 300 350 360 400 1000 10000 1000000; do
    sed "s/SCALE/$scale/" "$here/softmax/softmax_scaled.prime" >"$work/s$scale.prime"
    for model in softmax_max softmax_premasked softmax_bound; do
        exe=$("$primec" build "$work/s$scale.prime" --model $model -o "$work/s$scale") || exit 1
        out=$("$exe" --check --init uniform 2>&1)
        verdict=$(printf '%s\n' "$out" | grep -q '^check passed$' && echo passed || echo FAILED)
        worst=$(printf '%s\n' "$out" | awk '/^check .*error vs fp64/ {
                e = $6; b = $11; sub(/\)/, "", b);
                if (e == "inf" || e ~ /nan/ || b == "inf" || b ~ /nan/) { r = "non-finite"; bad = 1 }
                else if (!bad && e / b > w) w = e / b }
                END { if (bad) print r; else printf "%.3f\n", w }')
        printf '%-10s %-18s %-9s %s\n' "$scale" "$model" "$verdict" "$worst"
    done
done
