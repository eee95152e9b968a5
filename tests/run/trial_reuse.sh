#!/bin/sh
# trial_reuse.sh PRIMEC DIR FILE MODEL [--param ...]: the schedule, the
# emitted C and check's output with the residency trials' reuse
# (sched_learn_needs) on and off (PRIMEC_NO_TRIAL_REUSE) must be the same,
# and the reuse must have taken place (PRIMEC_TRIAL_REUSE_STATS).
set -u
primec=$1; dir=$2; file=$3; model=$4; shift 4
mkdir -p "$dir" || exit 1
for mode in schedule emit; do
    "$primec" build "$file" --model "$model" "$@" --dump-after=$mode >"$dir/on.$mode" 2>&1 || { echo "FAIL: $mode (reuse on)"; exit 1; }
    PRIMEC_NO_TRIAL_REUSE=1 "$primec" build "$file" --model "$model" "$@" --dump-after=$mode >"$dir/off.$mode" 2>&1 || { echo "FAIL: $mode (reuse off)"; exit 1; }
    [ -s "$dir/on.$mode" ] || { echo "FAIL: empty $mode dump"; exit 1; }
    cmp -s "$dir/on.$mode" "$dir/off.$mode" || { echo "FAIL: --dump-after=$mode differs with the trials' reuse"; exit 1; }
done
"$primec" check "$file" --model "$model" "$@" >"$dir/on.check" 2>&1
PRIMEC_NO_TRIAL_REUSE=1 "$primec" check "$file" --model "$model" "$@" >"$dir/off.check" 2>&1
cmp -s "$dir/on.check" "$dir/off.check" || { echo "FAIL: check differs with the trials' reuse"; exit 1; }
hits() { grep '^residency trials reused: ' | awk '{ n += $4 } END { print n + 0 }'; }
on=$(PRIMEC_TRIAL_REUSE_STATS=1 "$primec" check "$file" --model "$model" "$@" 2>&1 >/dev/null | hits)
off=$(PRIMEC_TRIAL_REUSE_STATS=1 PRIMEC_NO_TRIAL_REUSE=1 "$primec" check "$file" --model "$model" "$@" 2>&1 >/dev/null | hits)
[ "$on" -gt 0 ] || { echo "FAIL: no phase reused its residency trials"; exit 1; }
[ "$off" -eq 0 ] || { echo "FAIL: $off phases reused their trials with PRIMEC_NO_TRIAL_REUSE"; exit 1; }
echo "reused: $on phases"
echo PASS
