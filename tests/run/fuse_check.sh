#!/bin/sh
# fuse_check.sh PRIMEC CASE.prime DIR [MODEL [SLACK [PARAMS [INNER]]]] — kernels fused across
# instances (docs/kernels.md, "Fusion across instances"): builds the case's
# model (MODEL, default m)
# as it is and with --no-fuse, runs both with --check under
# PRIME_TILE_FILL=nan (a tile read before its first write poisons the
# results) and checks that
# - both pass the check against the dense fp64 reference, with counters
#   equal to the compiler's prediction;
# - the fused program's errors are those of the unfused one, tensor by
#   tensor (the fused kernel computes the same operations in the same order);
# - its C has fused kernels (the unfused one none), run by the first
#   phases of the dump's groups (a repeated layer's copies share the
#   tables of its first), and fewer ADD actions where the dump folds ADDs
#   into kernels;
# - every contribution the dump says accumulates into the tile it is added
#   to (`accumulate phase ...: into T (no tile T2, no add)`) allocates no
#   tile T2 in the rewritten program (the unfused one does), with fewer
#   ADD actions;
# - every copy the dump says is gone (`copy phase ...: T2 read as T1 (no
#   tile, no kernel, N FLOPs)`, kernel_copy.c) allocates no tile T2 in the
#   rewritten program (the unfused one does);
# - with INNER, some group's rows have at least INNER elements (the
#   dump's `rows ..., inner D:N`);
# - the fused program's peak is at most the unfused one's (the rows kept
#   in the kernel are not stored), or SLACK bytes more where the case says
#   why (a group allocates its stored outputs at its first phase, while
#   the frees of its inputs stay in the later members' phases);
# - a fused kernel that runs the backward of a softmax's exp
#   (causal_exp_shift and its variants state `grad S = dE * E;`) reads the
#   forward's E and computes no exp.
set -eu
primec=$1
case_file=$2
dir=$3
model=${4:-m}
slack=${5:-0}
# PARAMS: NAME=VALUE,... (--param NAME=VALUE for each, build and dump).
params=$(printf '%s' "${6:-}" | tr ',' '\n' | sed -n 's/^\(..*\)$/--param \1/p' | tr '\n' ' ')
mkdir -p "$dir/fused" "$dir/plain"
"$primec" build "$case_file" --model "$model" $params -o "$dir/fused" >/dev/null
"$primec" build "$case_file" --model "$model" $params --no-fuse -o "$dir/plain" >/dev/null
for v in fused plain; do
    PRIME_TILE_FILL=nan "$dir/$v/$model" --check >"$dir/$v.out" 2>&1 || { cat "$dir/$v.out"; echo "FAIL: $v"; exit 1; }
    grep -q "counters equal the compiler's prediction" "$dir/$v.out" || { echo "FAIL: $v: counters"; exit 1; }
    grep -q "check passed" "$dir/$v.out" || { echo "FAIL: $v: check"; exit 1; }
    grep '^check ' "$dir/$v.out" >"$dir/$v.errors"
done
diff -u "$dir/plain.errors" "$dir/fused.errors" || { echo "FAIL: the fused errors differ"; exit 1; }
groups=$("$primec" check "$case_file" --model "$model" $params --dump-after=kernels | grep -c '^ fused phases' || true)
# INNER: some group's rows have at least that many elements.
inner=$("$primec" check "$case_file" --model "$model" $params --dump-after=kernels |
    sed -n 's/^  rows .*, inner [^:]*:\([0-9]*\)$/\1/p' | sort -n | tail -1)
echo "fuse: longest fused row ${inner:-none}"
[ "${7:-0}" -eq 0 ] || [ "${inner:-0}" -ge "$7" ] || { echo "FAIL: no fused row of $7"; exit 1; }
adds=$("$primec" check "$case_file" --model "$model" $params --dump-after=kernels | grep -c '^  add after' || true)
funcs=$(grep -c '^static void fused[0-9]*(' "$dir/fused/$model.c" || true)
runs=$(grep -c 'fused[0-9]*};$' "$dir/fused/$model.c" || true)
plain=$(grep -c 'fused[0-9]*' "$dir/plain/$model.c" || true)
add_f=$(grep -c 'PRIME_ACT_ADD' "$dir/fused/$model.c" || true)
add_p=$(grep -c 'PRIME_ACT_ADD' "$dir/plain/$model.c" || true)
accums=$("$primec" check "$case_file" --model "$model" $params --dump-after=kernels | grep -c '^ accumulate phase' || true)
echo "fuse: $groups groups ($adds ADDs folded), $funcs fused kernels, run by $runs phases; $accums contributions accumulated; ADD actions $add_p unfused, $add_f fused"
[ "$groups" -gt 0 ] || [ "$accums" -gt 0 ] || { echo "FAIL: nothing fused or accumulated"; exit 1; }
[ "$plain" -eq 0 ] || { echo "FAIL: fused kernels in the unfused program"; exit 1; }
if [ "$groups" -gt 0 ]; then
    [ "$funcs" -gt 0 ] && [ "$runs" -gt 0 ] && [ "$runs" -le "$groups" ] ||
        { echo "FAIL: fused kernels"; exit 1; }
fi
if [ "$adds" -gt 0 ] || [ "$accums" -gt 0 ]; then
    [ "$add_f" -lt "$add_p" ] || { echo "FAIL: ADD actions"; exit 1; }
fi
# The tensors the kernels dump names with sed script $1 are tiles of the
# unfused program and none of the fused one ($2 says why they should not be).
no_tiles() {
    "$primec" check "$case_file" --model "$model" $params --dump-after=kernels |
        sed -n "$1" | tr -c 'A-Za-z0-9_\n' '_' |
        while read -r t2; do
            alloc="PRIME_ACT_ALLOC, .tensor = T_$t2,"
            grep -q "$alloc" "$dir/plain/$model.c" || { echo "FAIL: $t2 is no tile of the unfused program"; exit 1; }
            if grep -q "$alloc" "$dir/fused/$model.c"; then
                echo "FAIL: $t2 is allocated, yet $2"
                exit 1
            fi
        done
}
no_tiles 's/^ accumulate phase .*(no tile \(.*\), no add)$/\1/p' "its contribution accumulates" || exit 1
no_tiles 's/^ copy phase .*: \(.*\) read as .* (no tile, no kernel, .* FLOPs)$/\1/p' "its copy is gone" || exit 1
copies=$("$primec" check "$case_file" --model "$model" $params --dump-after=kernels | grep -c '^ copy phase' || true)
echo "fuse: $copies copies gone"
peak() { awk '/^ +0 +[0-9]/ {print $5; exit}' "$1"; }
pf=$(peak "$dir/fused.out")
pp=$(peak "$dir/plain.out")
echo "fuse: peak bytes of rank 0: $pp unfused, $pf fused"
[ -n "$pf" ] && [ -n "$pp" ] && [ "$pf" -le $((pp + slack)) ] || { echo "FAIL: peak"; exit 1; }
# Each fused kernel's comment names its members; the function ends at the
# first line that is a lone "}".
exp_bwd=$(awk '/^\/\* fused: / { fn = 1; com = 1; text = ""; bwd = 0; exps = 0 }
    com { line = $0; sub(/^ \* /, "", line); text = text " " line }
    com && /\*\// { com = 0; if (text ~ /backward [A-Za-z0-9_]* = *[a-z_]*exp/) bwd = 1 }
    fn && /prime_expf/ { exps++ }
    fn && /^}$/ { if (bwd) { n++; if (exps) bad++ } fn = 0 }
    END { printf "%d %d\n", n, bad }' "$dir/fused/$model.c")
echo "fuse: fused backward kernels of an exp, and of those computing an exp: $exp_bwd"
[ "${exp_bwd#* }" = 0 ] || { echo "FAIL: a fused backward recomputes exp"; exit 1; }
echo "fuse: PASS"
