#!/bin/sh
# same_schedule.sh PRIMEC OLD.prime NEW.prime MODEL...
#
# For each MODEL, a written model of OLD.prime and a run of NEW.prime of
# the same name: their resolved models (--dump-after=resolve, the model's
# own section) and their schedules (--dump-after=schedule) must be
# byte-identical.
set -u
primec=$1
old=$2
new=$3
shift 3
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
section() { # the lines of model $1 in a resolve dump
    awk -v m="$1" '/^model /{on = ($2 == m)} /^(op|partition) /{on = 0} on' "$2"
}
status=0
for model in "$@"; do
    for pass in resolve schedule; do
        "$primec" check "$old" --model "$model" --dump-after=$pass >"$work/old" || exit 1
        "$primec" check "$new" --model "$model" --dump-after=$pass >"$work/new" || exit 1
        if [ $pass = resolve ]; then
            section "$model" "$work/old" >"$work/old.m"
            section "$model" "$work/new" >"$work/new.m"
            mv "$work/old.m" "$work/old"
            mv "$work/new.m" "$work/new"
            [ -s "$work/old" ] || { echo "no model $model in the resolve dump"; exit 1; }
        fi
        if cmp -s "$work/old" "$work/new"; then
            echo "$model: $pass identical ($(wc -l <"$work/new") lines)"
        else
            echo "$model: $pass differs:"
            diff "$work/old" "$work/new" | head -20
            status=1
        fi
    done
done
exit $status
