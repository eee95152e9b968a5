#!/bin/sh
# golden.sh — run one golden case and compare it with its expected file,
# or rewrite the expected file (for review with `git diff`).
#
#   golden.sh check  PRIMEC GOLDEN_DIR WORK_DIR STAGE CASE
#   golden.sh update PRIMEC GOLDEN_DIR WORK_DIR STAGE CASE
#   golden.sh update-all PRIMEC GOLDEN_DIR WORK_DIR
#
# A case is GOLDEN_DIR/STAGE/CASE.<input> next to one expected file:
#
#   stage    input     expected   what is recorded
#   check    .prime    .err       stderr+stdout of `primec check CASE.prime`, then `exit: N`
#   explain  .prime    .explain   stdout of `primec explain CASE.prime` (must exit 0)
#   emit     .prime    .c         the formatted C of `primec build CASE.prime --emit-only`
#   dump     .prime    .dump      stdout of `primec check CASE.prime --dump-after=PASS`, where
#                                 the case's first line is `// dump-after: PASS`
#   cli      .args     .out       stderr+stdout of `primec $(cat CASE.args)`, then `exit: N`
#   gen      .sh       .err       as check, on the program `sh CASE.sh` prints (written to
#                                 WORK_DIR/gen/CASE.prime): inputs too large to keep in git
#
# Every command runs inside GOLDEN_DIR/STAGE (gen: WORK_DIR/gen) with a
# relative file name, so the file names in diagnostics and generated
# comments are stable.
set -u

mode=$1
primec=$2
golden=$3
work=$4

fail() {
    printf 'golden: %s\n' "$*" >&2
    exit 1
}

# Writes the actual output of one case to $3 (a file outside the source tree).
produce() {
    stage=$1
    cname=$2
    actual=$3
    dir="$golden/$stage"
    cd "$dir" || fail "no directory $dir"
    case $stage in
    check)
        "$primec" check "$cname.prime" >"$actual" 2>&1
        printf 'exit: %d\n' $? >>"$actual"
        ;;
    gen)
        sh "$cname.sh" >"$work/gen/$cname.prime" || fail "$stage/$cname.sh failed"
        (cd "$work/gen" && "$primec" check "$cname.prime") >"$actual" 2>&1
        printf 'exit: %d\n' $? >>"$actual"
        ;;
    cli)
        # The arguments are words on one line; no quoting is needed or supported.
        # shellcheck disable=SC2046
        "$primec" $(cat "$cname.args") >"$actual" 2>&1
        printf 'exit: %d\n' $? >>"$actual"
        ;;
    explain)
        "$primec" explain "$cname.prime" >"$actual" 2>"$actual.stderr" ||
            fail "primec explain $stage/$cname.prime failed: $(cat "$actual.stderr")"
        ;;
    dump)
        pass=$(sed -n '1s|^// dump-after: *\([a-z]*\).*|\1|p' "$cname.prime")
        [ -n "$pass" ] || fail "$stage/$cname.prime: the first line must be '// dump-after: PASS'"
        "$primec" check "$cname.prime" "--dump-after=$pass" >"$actual" 2>"$actual.stderr" ||
            fail "primec check --dump-after=$pass $stage/$cname.prime failed: $(cat "$actual.stderr")"
        ;;
    emit)
        out="$actual.d"
        rm -rf "$out"
        "$primec" build "$cname.prime" --emit-only -o "$out" >/dev/null 2>"$actual.stderr" ||
            fail "primec build --emit-only $stage/$cname.prime failed: $(cat "$actual.stderr")"
        set -- "$out"/*.c
        [ $# -eq 1 ] && [ -f "$1" ] || fail "$stage/$cname.prime must emit exactly one C file"
        cp "$1" "$actual"
        ;;
    *)
        fail "unknown stage '$stage'"
        ;;
    esac
}

expected_of() {
    case $1 in
    check | gen) echo "$golden/$1/$2.err" ;;
    cli) echo "$golden/$1/$2.out" ;;
    explain) echo "$golden/$1/$2.explain" ;;
    dump) echo "$golden/$1/$2.dump" ;;
    emit) echo "$golden/$1/$2.c" ;;
    *) fail "unknown stage '$1'" ;;
    esac
}

run_one() {
    what=$1
    stage=$2
    cname=$3
    mkdir -p "$work/$stage" || fail "cannot create $work/$stage"
    actual="$work/$stage/$cname.actual"
    produce "$stage" "$cname" "$actual"
    expected=$(expected_of "$stage" "$cname")
    if [ "$what" = update ]; then
        if [ -f "$expected" ] && cmp -s "$actual" "$expected"; then
            return 0
        fi
        cp "$actual" "$expected" || fail "cannot write $expected"
        printf 'golden: updated %s\n' "$expected"
        return 0
    fi
    if [ ! -f "$expected" ]; then
        fail "no expected file $expected; run \`cmake --build BUILD --target update-golden\` and review it"
    fi
    if ! cmp -s "$expected" "$actual"; then
        printf 'golden: %s/%s differs from its expected file (- expected, + actual):\n' "$stage" "$cname"
        diff -u "$expected" "$actual" | sed "1s|.*|--- $expected|;2s|.*|+++ actual|"
        printf 'golden: if the change is intended: cmake --build BUILD --target update-golden, then review git diff\n'
        exit 1
    fi
}

case $mode in
check | update)
    [ $# -eq 6 ] || fail "usage: golden.sh $mode PRIMEC GOLDEN_DIR WORK_DIR STAGE CASE"
    run_one "$mode" "$5" "$6"
    ;;
update-all)
    for stage in check cli explain dump emit gen; do
        ext=prime
        [ "$stage" = cli ] && ext=args
        [ "$stage" = gen ] && ext=sh
        for input in "$golden/$stage"/*.$ext; do
            [ -f "$input" ] || continue
            name=${input##*/}
            name=${name%.*}
            (run_one update "$stage" "$name") || exit 1
        done
    done
    ;;
*)
    fail "unknown mode '$mode' (check, update, update-all)"
    ;;
esac
