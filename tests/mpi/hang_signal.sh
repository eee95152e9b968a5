#!/bin/sh
# hang_signal.sh MODE PRIMEC MODEL.prime DIR MPIEXEC [MPIEXEC_FLAG...]
#
# MPI programs that must not hang (tests/mpi.cmake). Builds MODEL.prime
# (4 devices) with `primec build --target mpi` and, by MODE:
#
#   stop      runs it as 4 processes with --timeout 3 and stops rank 1
#             (SIGSTOP) mid-run: mpirun must exit with 4 within 8 s, a
#             process must say which rank waited for whom, where, and no
#             process and none of the job's /dev/shm files may be left;
#   kill      the same with rank 1 killed (SIGKILL): a non-zero exit within
#             8 s, no process and no /dev/shm file left;
#   launcher  stops rank 1 and kills mpirun itself (SIGKILL): every rank,
#             the stopped one included, must be gone within 8 s, and
#             the job's /dev/shm files too (which Open MPI's daemon would
#             remove: each rank's watchdog does, runtime/shm_watchdog.c);
#   ranks     runs it as 3 processes: exit 2 and the reason.
#
# Prints PASS or FAIL with the reason last.
set -u
mode=$1 primec=$2 model=$3 dir=$4
shift 4
timeout=3
limit_ms=8000

fail() {
    echo "FAIL: $*"
    cleanup
    exit 1
}

ranks=""
mp=""
cleanup() {
    for p in $ranks $mp; do
        kill -KILL "$p" 2>/dev/null
    done
}
trap cleanup EXIT

alive() {
    [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

now_ms() {
    echo $(($(date +%s%N) / 1000000))
}

mkdir -p "$dir" || fail "cannot create $dir"
exe=$("$primec" build "$model" --target mpi -o "$dir" 2>"$dir/build.err") ||
    { cat "$dir/build.err"; fail "primec build --target mpi"; }

if [ "$mode" = ranks ]; then
    "$@" -np 3 "$exe" --check >"$dir/out" 2>"$dir/err"
    rc=$?
    cat "$dir/out" "$dir/err"
    [ "$rc" -eq 2 ] || fail "3 processes for 4 devices exited $rc, not 2"
    grep -q "this program runs on 4 devices, one MPI process each, but MPI started 3 processes (run it as: mpirun -np 4" "$dir/err" ||
        fail "no reason for the wrong process count"
    grep -q "check passed" "$dir/out" && fail "a report was printed"
    trap - EXIT
    echo "PASS: a wrong MPI process count exits 2 with the reason"
    exit 0
fi

# Long enough to be signalled mid-run, short enough to end by itself
# should this script be killed first.
"$@" -np 4 "$exe" --repeat 20000 --timeout "$timeout" >"$dir/out" 2>"$dir/err" &
mp=$!
# The launcher's children are the ranks (one node).
victim=""
for i in $(seq 200); do
    ranks=$(pgrep -P "$mp" | tr '\n' ' ')
    [ "$(echo $ranks | wc -w)" -eq 4 ] && break
    sleep 0.1
done
[ "$(echo $ranks | wc -w)" -eq 4 ] || fail "mpirun did not start 4 processes: '$ranks'"
# Mid-run: the repeated training steps are under way (and every process
# has its MPI environment: it has been exec'd).
sleep 2
for p in $ranks; do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && victim=$p
done
[ -n "$victim" ] || fail "no process of rank 1 among $ranks"
alive "$mp" || { cat "$dir/out" "$dir/err"; fail "the run ended before the signal"; }
segments=$(for p in $ranks; do grep -o '/dev/shm/[^ ]*' "/proc/$p/maps" 2>/dev/null; done | sort -u)

start=$(now_ms)
case $mode in
stop) kill -STOP "$victim" ;;
kill) kill -KILL "$victim" ;;
launcher)
    kill -STOP "$victim"
    kill -KILL "$mp"
    ;;
*) fail "unknown mode '$mode'" ;;
esac

if [ "$mode" = launcher ]; then
    wait "$mp" 2>/dev/null
    left=$ranks
    while [ -n "$left" ] && [ $(($(now_ms) - start)) -lt "$limit_ms" ]; do
        still=""
        for p in $left; do alive "$p" && still="$still $p"; done
        left=$still
        [ -n "$left" ] && sleep 0.1
    done
    ms=$(($(now_ms) - start))
    [ -z "$left" ] || fail "ranks left behind $ms ms after the launcher died:$left"
    echo "every rank gone $ms ms after the launcher was killed (rank 1 stopped)"
    # Each rank's watchdog removes its segment once rank and launcher
    # are gone.
    left=$segments
    while [ -n "$left" ] && [ $(($(now_ms) - start)) -lt "$limit_ms" ]; do
        still=""
        for f in $left; do [ -e "$f" ] && still="$still $f"; done
        left=$still
        [ -n "$left" ] && sleep 0.1
    done
    ms=$(($(now_ms) - start))
    [ -z "$left" ] || { rm -f $left; fail "$ms ms after the launcher died, left in /dev/shm (removed):$left"; }
    [ -n "$segments" ] || fail "the job mapped no /dev/shm file: nothing was tested"
    trap - EXIT
    echo "PASS: no orphan ranks and no /dev/shm file ($(echo $segments | wc -w) segments) $ms ms after the launcher died"
    exit 0
fi

wait "$mp"
rc=$?
ms=$(($(now_ms) - start))
mp=""
cat "$dir/out" "$dir/err"
echo "mpirun exited $rc after $ms ms (--timeout $timeout)"
[ "$ms" -lt "$limit_ms" ] || fail "took $ms ms to exit"
sleep 0.5
for p in $ranks; do
    alive "$p" && fail "rank process $p left behind"
done
for f in $segments; do
    [ -e "$f" ] && fail "$f left in /dev/shm"
done
if [ "$mode" = stop ]; then
    [ "$rc" -eq 4 ] || fail "exit $rc, not 4"
    grep -q "rank [0-9]*: no answer within $timeout s" "$dir/err" || fail "no message naming the rank that waited"
    grep -q "run failed: timed out waiting for a peer (--timeout $timeout s)" "$dir/err" || fail "no verdict"
else
    [ "$rc" -ne 0 ] || fail "exit 0 after a rank was killed"
fi
trap - EXIT
echo "PASS: $mode of rank 1 ended the run (exit $rc) after $ms ms, nothing left behind"
