#!/bin/sh
# compile_check.sh — compile-tier checks of the C that primec emits.
#
#   compile_check.sh determinism PRIMEC WORK_DIR MODEL.prime
#       emits MODEL twice into two directories; the files must be equal
#       byte for byte (no dates, no pointer-order iteration).
#   compile_check.sh format PRIMEC WORK_DIR MODEL.prime CLANG_FORMAT FORMAT_C
#       emits MODEL; clang-format with the style string of compiler/format.c
#       (FORMAT_C) must leave the file unchanged.
set -u

fail() {
    printf 'compile_check: %s\n' "$*" >&2
    exit 1
}

[ $# -ge 4 ] || fail "usage: compile_check.sh determinism|format PRIMEC WORK_DIR MODEL.prime [CLANG_FORMAT FORMAT_C]"
mode=$1
primec=$2
work=$3
model=$4

# emit DIR: writes DIR/NAME.c and prints its path.
emit() {
    rm -rf "$1"
    mkdir -p "$1" || fail "cannot create $1"
    "$primec" build "$model" ${PRIMEC_MODEL:+--model "$PRIMEC_MODEL"} --emit-only -o "$1" >"$1.stdout" 2>"$1.stderr" ||
        fail "primec build --emit-only $model failed: $(cat "$1.stderr")"
    set -- "$1"/*.c
    [ $# -eq 1 ] && [ -f "$1" ] || fail "$model must emit exactly one C file"
    printf '%s\n' "$1"
}

case $mode in
determinism)
    a=$(emit "$work/a") || exit 1
    b=$(emit "$work/b") || exit 1
    if ! cmp -s "$a" "$b"; then
        printf 'compile_check: two emissions of %s differ:\n' "$model"
        diff -u "$a" "$b"
        exit 1
    fi
    printf '%s: two emissions are byte-identical (%s bytes)\n' "$model" "$(wc -c <"$a" | tr -d ' ')"
    ;;
format)
    [ $# -ge 6 ] || fail "format needs CLANG_FORMAT and FORMAT_C"
    clang_format=$5
    format_c=$6
    style=$(sed -n 's/.*"\({BasedOnStyle[^"]*}\)".*/\1/p' "$format_c")
    [ -n "$style" ] || fail "no style string ({BasedOnStyle: ...}) found in $format_c"
    a=$(emit "$work/a") || exit 1
    "$clang_format" "--style=$style" "$a" >"$work/reformatted.c" ||
        fail "$clang_format failed on $a"
    if ! cmp -s "$a" "$work/reformatted.c"; then
        printf 'compile_check: clang-format --style=%s changes %s:\n' "$style" "$a"
        diff -u "$a" "$work/reformatted.c"
        exit 1
    fi
    # The tables between "// clang-format off" and "// clang-format on"
    # are laid out by compiler/format.c, to the same column limit.
    long=$(awk 'length($0) > 100 { print FILENAME ":" FNR ": " length($0) " columns" }' "$a" | head -5)
    [ -z "$long" ] || fail "lines past 100 columns in $a: $long"
    grep -q '^// clang-format off$' "$a" || fail "no table region (// clang-format off) in $a"
    printf '%s: emitted C is clang-format clean (%s), no line past 100 columns\n' "$model" "$style"
    ;;
*)
    fail "unknown mode '$mode'"
    ;;
esac
