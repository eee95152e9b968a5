#!/bin/sh
# calibrate_check.sh — how well does the cost model predict this machine?
#
# For every examples/matmul_*.prime, at the example's shape and at 8x
# every dimension, builds the program for one backend, measures one
# training step and compares it with the step time `primec cost` predicts
# from two calibrated profiles:
#   A  `primec calibrate --backend B` (worlds of 2 and 4 devices fitted
#      together), run once at the start;
#   B  `primec calibrate --backend B --worlds 4` (the device count of
#      these programs), run again just before each program is measured,
#      so that a machine whose speed drifts is measured and calibrated in
#      the same state.
# Backends: cpu (the default: `primec build --target cpu`, 4
# thread-devices in one process) and mpi (`primec build --target mpi`,
# run as `mpiexec -n 4`, one process per device; with Open MPI's mpiexec
# the script adds --oversubscribe, and --allow-run-as-root under root,
# as primec calibrate does).
#
# Two measurements per program:
#   phases  the program's own timeline (--trace): from the moment the last
#           device starts its first step to the end of the last step, in
#           the last repetition of `--repeat 3`, median of 5 runs. This is
#           what the model predicts; starting at the last device's start
#           leaves out thread-start skew, which the model does not know.
#   wall    (T(R2) - T(R1)) / (R2 - R1), T(R) the wall time of the program
#           with `--repeat R` (best of 3 runs each): process start-up
#           (and with mpi, mpiexec's) and world creation cancel out, but
#           each repetition also fills its inputs (and with cpu starts its
#           threads), which the model does not price.
# Errors are (predicted - measured) / measured.
#
# usage: bench/calibrate_check.sh [-q] [--backend cpu|mpi]
#                                            (-q: quick calibrations)
# env:   PRIMEC    the primec binary (default: build/compiler/primec)
#        MPIEXEC   mpi: the MPI launcher (default: mpiexec)
#        KEEP=1    keep the work directory
# Needs python3 (to read the JSON of `primec cost` and of the traces).
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
primec=${PRIMEC:-$root/build/compiler/primec}
quick=
backend=cpu
while [ $# -gt 0 ]; do
    case $1 in
    -q) quick=--quick ;;
    --backend)
        [ $# -ge 2 ] || { echo "calibrate_check: --backend wants cpu or mpi" >&2; exit 2; }
        backend=$2
        shift
        ;;
    *)
        echo "usage: bench/calibrate_check.sh [-q] [--backend cpu|mpi]" >&2
        exit 2
        ;;
    esac
    shift
done
case $backend in
cpu | mpi) ;;
*) echo "calibrate_check: unknown backend '$backend' (cpu, mpi)" >&2; exit 2 ;;
esac

if [ ! -x "$primec" ]; then
    echo "calibrate_check: no primec at $primec (build first, or set PRIMEC)" >&2
    exit 2
fi
if ! "$primec" calibrate --help >/dev/null 2>&1 || ! "$primec" cost --help >/dev/null 2>&1; then
    echo "calibrate_check: $primec has no 'calibrate' or 'cost' command" >&2
    exit 2
fi
command -v python3 >/dev/null || { echo "calibrate_check: needs python3" >&2; exit 2; }

# How a program of 4 devices is started; the time the wall measurement
# aims at (mpiexec's start-up varies more than a process's).
launch=
target_ns=300000000
if [ "$backend" = mpi ]; then
    mpiexec=${MPIEXEC:-mpiexec}
    command -v "$mpiexec" >/dev/null || { echo "calibrate_check: no MPI launcher '$mpiexec'" >&2; exit 2; }
    launch="$mpiexec"
    if "$mpiexec" --version 2>/dev/null | grep -q -e "Open MPI" -e OpenRTE; then
        launch="$launch --oversubscribe"
        [ "$(id -u)" -ne 0 ] || launch="$launch --allow-run-as-root"
    fi
    launch="$launch -n 4"
    calib_mpi="--mpiexec $mpiexec"
    target_ns=1000000000
fi
calib="--backend $backend ${calib_mpi:-}"

work=$(mktemp -d "${TMPDIR:-/tmp}/primec-calibrate-check.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT

prof_a=$work/$backend-2-4.profile
prof_b=$work/$backend-4.profile
echo "== primec calibrate $calib $quick -o $prof_a" >&2
"$primec" calibrate $calib $quick -o "$prof_a"

now_ns() { date +%s%N; }

# Wall time in ns of `exe --repeat R`, best of 3.
run_ns() {
    best=
    for _ in 1 2 3; do
        t0=$(now_ns)
        $launch "$1" --repeat "$2" >/dev/null
        t1=$(now_ns)
        d=$((t1 - t0))
        if [ -z "$best" ] || [ "$d" -lt "$best" ]; then best=$d; fi
    done
    echo "$best"
}

# Median over 5 runs of the phases' span in a --trace timeline, in µs.
trace_us() {
    for _ in 1 2 3 4 5; do
        $launch "$1" --repeat 3 --trace "$work/trace.json" >/dev/null
        python3 -c '
import json, sys
ev = json.load(open(sys.argv[1]))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
ev = [e for e in ev if e.get("ph") == "X" and e.get("name") == "step"]
first = {}
for e in ev:
    first[e["tid"]] = min(first.get(e["tid"], e["ts"]), e["ts"])
print(max(e["ts"] + e["dur"] for e in ev) - max(first.values()))' "$work/trace.json"
    done | sort -g | sed -n 3p
}

# Predicted step time and step time less the init phase, in µs.
predict() {
    "$primec" cost "$1" --profile "$2" --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
init = sum(p["time_us"] for p in r["phases"] if p["kind"] == "init")
print(r["step_us"], r["step_us"] - init)'
}

# One program: model file, label. Prints a table row.
check() {
    file=$1
    label=$2
    model=$(sed -n 's/^model \([A-Za-z0-9_]*\).*/\1/p' "$file" | head -n 1)
    "$primec" build "$file" --target "$backend" -o "$work/bin" >/dev/null
    exe=$work/bin/$model
    "$primec" calibrate $calib $quick --worlds 4 -o "$prof_b" 2>/dev/null
    pa=$(predict "$file" "$prof_a")
    pb=$(predict "$file" "$prof_b")
    phases=$(trace_us "$exe")
    # Pick R so that the measured difference takes about target_ns.
    t5=$(run_ns "$exe" 5)
    t25=$(run_ns "$exe" 25)
    est=$(((t25 - t5) / 20))
    [ "$est" -gt 0 ] || est=1
    n=$((target_ns / est))
    [ "$n" -ge 20 ] || n=20
    [ "$n" -le 4000 ] || n=4000
    t1=$(run_ns "$exe" 5)
    t2=$(run_ns "$exe" $((5 + n)))
    echo "$pa $pb" | awk -v m="$label" -v ph="$phases" -v a="$t1" -v b="$t2" -v n="$n" '{
        wall = (b - a) / n / 1000.0
        printf "%-22s %10.1f %10.1f | %10.1f %+7.1f%% | %10.1f %+7.1f%% %+7.1f%%\n", m, ph, wall,
               $2, 100 * ($2 - ph) / ph, $4, 100 * ($4 - ph) / ph, 100 * ($3 - wall) / wall
    }' | tee -a "$work/rows"
}

echo "backend $backend${launch:+ (programs started as: $launch PROGRAM)}"
echo "A: $(sed -n 's/^description //p' "$prof_a" | head -n 1), worlds of 2 and 4"
echo "B: the same, worlds of 4 only, recalibrated before each program"
printf '%-22s %10s %10s | %10s %8s | %10s %8s %8s\n' program phases_us wall_us A_pred_us A_err B_pred_us B_err B_wall
for f in "$root"/examples/matmul_*.prime; do
    base=$(basename "$f" .prime)
    check "$f" "$base"
    # The same partition at 8x every dimension.
    big=$work/${base}_x8.prime
    awk '/param m =/ {
            match($0, /m = [0-9]+/); m = substr($0, RSTART + 4, RLENGTH - 4)
            match($0, /k = [0-9]+/); k = substr($0, RSTART + 4, RLENGTH - 4)
            match($0, /n = [0-9]+/); n = substr($0, RSTART + 4, RLENGTH - 4)
            printf "    param m = %d, k = %d, n = %d;\n", 8 * m, 8 * k, 8 * n
            next
         }
         /^model / { sub(/^model [A-Za-z0-9_]+/, "model " $2 "_x8") }
         { print }' "$f" >"$big"
    check "$big" "${base}_x8"
done
awk '{ for (i = 1; i <= NF; ++i) if ($i ~ /%$/) { v = $i; sub(/%/, "", v); v = v + 0; if (v < 0) v = -v; c++; s[c] += v }
       c = 0; n++ }
     END { if (n) printf "mean |error| over %d programs: A phases %.1f%%, B phases %.1f%%, B wall %.1f%%\n",
                         n, s[1] / n, s[2] / n, s[3] / n }' "$work/rows"
