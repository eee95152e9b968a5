#!/bin/sh
# hang_blas_ulimit.sh PRIMEC MODEL.prime DIR SANITIZED
#
# A built program under a low address-space limit (tests/hang.cmake):
# OpenBLAS (Debian's 0.3.21) retries a buffer it cannot map for ever, so
# the program must refuse to start its GEMMs instead. Builds the model
# with `primec build --target cpu` and runs it, with and without --check,
# under `ulimit -v 300000` (293 MiB; its 4 devices need 4 x 128 MiB of
# BLAS buffers): each run must end with exit 3 within 10 s, no report on
# stdout, and the message naming the buffers and the limit. Under a
# generous limit (16 GiB) the same program still passes --check. Exits
# 77 (skipped) when SANITIZED is 1: ASan reserves terabytes of address
# space and cannot start under any such limit. Prints PASS or FAIL with
# the reason last.
set -u
primec=$1 model=$2 dir=$3 sanitized=$4

fail() {
    echo "FAIL: $*"
    exit 1
}

if [ "$sanitized" = 1 ]; then
    echo "SKIP: a sanitized program cannot run under ulimit -v"
    exit 77
fi
mkdir -p "$dir" || fail "cannot create $dir"
exe=$("$primec" build "$model" --target cpu -o "$dir") || fail "primec build"
for opt in --check "--seed 1"; do
    start=$(date +%s%N)
    (ulimit -v 300000 && exec timeout 20 "$exe" $opt) >"$dir/out" 2>"$dir/err"
    rc=$?
    ms=$((($(date +%s%N) - start) / 1000000))
    cat "$dir/out" "$dir/err"
    echo "$opt: exit $rc after $ms ms"
    [ "$rc" -eq 124 ] && fail "$opt: hung under ulimit -v 300000"
    [ "$rc" -eq 3 ] || fail "$opt: exit $rc, not 3"
    [ "$ms" -lt 10000 ] || fail "$opt: took $ms ms"
    [ -s "$dir/out" ] && fail "$opt: a report was printed for a run that did not start"
    grep -q "not enough address space for the BLAS: the devices need 4 x 128 MiB of GEMM buffers.*, more than is left under the limit of 29[0-9] MiB (ulimit -v / -d); raise the limit" "$dir/err" ||
        fail "$opt: no message naming the buffers and the limit"
done
(ulimit -v 16777216 && exec timeout 60 "$exe" --check) >"$dir/ok.out" 2>&1 ||
    { cat "$dir/ok.out"; fail "--check under ulimit -v 16777216 failed"; }
echo "PASS: under ulimit -v 300000 the program refused to start with exit 3, without hanging"
