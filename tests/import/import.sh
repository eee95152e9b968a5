#!/bin/sh
# import.sh — the tests of `primec import` (tests/import.cmake writes the
# config files they read into WORK).
#
#   import.sh golden  PRIMEC WORK EXPECTED CASE [ARGS...]
#       stderr+stdout of `primec import CASE.json ARGS`, then `exit: N`,
#       compared with EXPECTED (tests/golden/import/CASE.out)
#   import.sh update  PRIMEC WORK EXPECTED CASE [ARGS...]
#       rewrites EXPECTED (for review with `git diff`)
#   import.sh check   PRIMEC WORK CASE [ARGS...]
#       imports CASE.json and runs `primec check` on the model written
#   import.sh example PRIMEC WORK CASE EXAMPLE MODEL [ARGS...]
#       imports CASE.json as MODEL and compares `primec check` of it with
#       `primec check EXAMPLE --model MODEL` (the hand-written model)
#
# Commands run inside WORK with relative file names, so the names in
# diagnostics and in the written model's comment are stable.
set -u

fail() {
    printf 'import: %s\n' "$*" >&2
    exit 1
}

mode=$1
primec=$2
work=$3
shift 3
cd "$work" || fail "no directory $work"

case $mode in
golden | update)
    expected=$1
    cname=$2
    shift 2
    actual="$cname.actual"
    "$primec" import "$cname.json" "$@" >"$actual" 2>&1
    printf 'exit: %d\n' $? >>"$actual"
    if [ "$mode" = update ]; then
        cmp -s "$actual" "$expected" 2>/dev/null || {
            cp "$actual" "$expected" || fail "cannot write $expected"
            printf 'import: updated %s\n' "$expected"
        }
        exit 0
    fi
    [ -f "$expected" ] || fail "no expected file $expected; run \`cmake --build BUILD --target update-golden\` and review it"
    if ! cmp -s "$expected" "$actual"; then
        printf 'import: %s differs from its expected file (- expected, + actual):\n' "$cname"
        diff -u "$expected" "$actual" | sed "1s|.*|--- $expected|;2s|.*|+++ actual|"
        exit 1
    fi
    ;;
check)
    cname=$1
    shift
    "$primec" import "$cname.json" "$@" -o "$cname.prime" || fail "primec import $cname.json failed"
    out=$("$primec" check "$cname.prime") || fail "primec check $cname.prime failed: $out"
    printf '%s\n' "$out"
    case $out in
    *": ok: "*) ;;
    *) fail "primec check $cname.prime did not say ok" ;;
    esac
    ;;
example)
    cname=$1
    example=$2
    model=$3
    shift 3
    "$primec" import "$cname.json" --model "$model" "$@" -o "$cname.$model.prime" ||
        fail "primec import $cname.json failed"
    got=$("$primec" check "$cname.$model.prime") || fail "primec check of the imported model failed: $got"
    want=$("$primec" check "$example" --model "$model") || fail "primec check $example failed: $want"
    printf 'imported: %s\nexample:  %s\n' "$got" "$want"
    [ "$got" = "$want" ] || fail "the imported model differs from $example's $model"
    ;;
*)
    fail "unknown mode '$mode'"
    ;;
esac
