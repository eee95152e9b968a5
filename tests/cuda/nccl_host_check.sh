#!/bin/sh
# nccl_host_check.sh PRIMEC CC CFLAGS INCLUDE LIB LINK WORK SRC — the
# one-process-per-GPU world of the CUDA runtime (runtime/
# prime_cuda_world_nccl.c, prime_cuda_nccl.c, rendezvous.c) on the host
# emulation (LIB: libprime_rt_cuda_host.a, whose NCCL is pcu_host_nccl.c:
# communicators of any size between processes, over Unix sockets):
#   - a one-device model runs as a world of one process, with no option,
#     with --rank 0 --world-size 1 and with RANK / WORLD_SIZE, and passes
#     --check with the counters equal to the prediction;
#   - the square 2x2 matmul (4 devices) refuses a missing or wrong world
#     (exit 2, saying why);
#   - 4 processes, one per device, run the square 2x2 matmul, a 2x2 grid
#     whose all-reduces are within the mesh's rows (tests/cuda/
#     grid_2x2.prime: communicators of groups), both meeting over TCP on
#     127.0.0.1, and the small OPT MLP on 4 devices with Megatron-LM
#     (meeting through an id file): each passes --check, counters equal to the prediction, and
#     rank 0's --trace has both rows (compute, communication) of every rank;
#   - a rank that exits in the middle of the run (PNC_HOST_EXIT) and a
#     rank that stops answering (PRIME_FAULT=stall) end every other rank
#     quickly (well before --timeout) or at the deadline, with a message
#     naming the rank and the NCCL call (exit 3), never a hang;
#   - a missing rank, a refused connection and a missing id file end at
#     the deadline with the message of rendezvous.h (exit 4 or 3).
set -u
primec=$1 cc=$2 cflags=$3 include=$4 lib=$5 link=$6 work=$7 src=$8
rm -rf "$work" && mkdir -p "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
build() { # FILE MODEL DIR
    "$primec" build "$1" --model "$2" --target cuda --emit-only -o "$3" >/dev/null ||
        fail "primec build --target cuda --emit-only $1 --model $2"
    # shellcheck disable=SC2086
    $cc -std=c11 -O1 -Wall -Wextra -Werror $cflags -I"$include" "$3/$2.c" -o "$3/$2" "$lib" $link ||
        fail "$2.c does not build against $lib"
}
build "$src/tests/cuda/one_device.prime" one_device "$work/one"
build "$src/tests/golden/emit/square-2x2.prime" m "$work/sq"
build "$src/tests/cuda/grid_2x2.prime" grid_2x2 "$work/grid"
build "$src/examples/opt_mlp.prime" opt_mlp_small "$work/mlp"
one=$work/one/one_device sq=$work/sq/m
# The communicators' sockets go in a directory of TMPDIR.
TMPDIR=$work
export TMPDIR

# passes WHAT ENV... -- ARGS...: a world of one that must pass --check.
passes() {
    what=$1
    shift
    env "$@" >"$work/out.txt" 2>&1
    rc=$?
    if [ $rc -ne 0 ] || ! grep -q "^check passed" "$work/out.txt" ||
        ! grep -q "^counters equal the compiler's prediction" "$work/out.txt"; then
        cat "$work/out.txt"
        fail "$what: exit $rc"
    fi
}
passes "a world of one, no option" "$one" --check
passes "--rank 0 --world-size 1" "$one" --rank 0 --world-size 1 --check
passes "RANK=0 WORLD_SIZE=1" RANK=0 WORLD_SIZE=1 "$one" --check

# expect WHAT CODE TEXT CMD...: CMD exits with CODE saying TEXT.
expect() {
    what=$1 code=$2 text=$3
    shift 3
    "$@" >"$work/out.txt" 2>&1
    rc=$?
    if [ $rc -ne "$code" ] || ! grep -qF "$text" "$work/out.txt"; then
        cat "$work/out.txt"
        fail "$what: exit $rc, expected $code and '$text'"
    fi
}
expect "no world" 2 "m: the mesh has 4 devices: run one process per GPU" "$sq" --check
expect "world of 2" 2 "m: the mesh has 4 devices, but the world size is 2" \
    "$sq" --rank 0 --world-size 2 --master 127.0.0.1:1
expect "rank 5" 2 "m: rank 5 is not below the world size 4" \
    "$sq" --rank 5 --world-size 4 --master 127.0.0.1:1
expect "no address" 2 "m: a world of 4 ranks needs rank 0's address" "$sq" --rank 1 --world-size 4
expect "--master" 2 "m: --master needs ADDR:PORT with a port from 1 to 65535, not 'node7'" \
    "$sq" --rank 1 --world-size 4 --master node7
expect "--rank x" 2 "m: --rank needs a number from 0 to 65535, not 'x'" "$sq" --rank x
expect "MASTER_PORT" 2 "m: MASTER_PORT 'abc' is not a number from 1 to 65535" \
    env RANK=1 WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=abc "$sq"
expect "--local ignores the world" 0 "check passed" \
    env RANK=1 WORLD_SIZE=4 MASTER_PORT=abc "$sq" --local --check

# A port no one listens on (bound, read and closed).
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# world RANKS ARGS...: ranks RANKS of 4 of $prog (default $sq) started at
# once with ARGS; each one's output in $work/rank-R.txt and exit status in
# $work/rank-R.rc.
prog=$sq
world() {
    ranks=$1
    shift
    pids=
    for r in $ranks; do
        { "$prog" --rank "$r" --world-size 4 "$@" >"$work/rank-$r.txt" 2>&1; echo $? >"$work/rank-$r.rc"; } &
        pids="$pids $!"
    done
    # shellcheck disable=SC2086
    wait $pids
}
# ranked R CODE TEXT: rank R exited with CODE saying TEXT (any, when "").
ranked() {
    if [ "$(cat "$work/rank-$1.rc")" -ne "$2" ] ||
        { [ -n "$3" ] && ! grep -qF "$3" "$work/rank-$1.txt"; }; then
        cat "$work/rank-$1.txt"
        fail "rank $1: exit $(cat "$work/rank-$1.rc"), expected $2 and '$3'"
    fi
}
# all_pass WHAT: every rank exited with 0, rank 0 reporting a passed check
# and the counters equal to the prediction.
all_pass() {
    for r in 0 1 2 3; do ranked $r 0 ""; done
    ranked 0 0 "check passed"
    ranked 0 0 "counters equal the compiler's prediction"
    echo "$1: 4 processes passed"
}

port=$(free_port)
world "0 1 2 3" --master "127.0.0.1:$port" --timeout 20 --check --trace "$work/trace.json"
all_pass "square 2x2 matmul over TCP"
# Rank 0's trace has every rank's spans on both rows (compute, communication).
python3 - "$work/trace.json" <<'PY' || fail "the trace of a world of 4 processes"
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
rows = {(e["pid"], e["tid"]) for e in events if e.get("ph") == "X"}
missing = [(r, t) for r in range(4) for t in (0, 1) if (r, t) not in rows]
if missing:
    sys.exit("no span of (rank, row) %s" % missing)
PY
prog=$work/grid/grid_2x2 port=$(free_port)
world "0 1 2 3" --master "127.0.0.1:$port" --timeout 20 --check
all_pass "grid_2x2 (all-reduces within the mesh's rows) over TCP"
prog=$work/mlp/opt_mlp_small
world "0 1 2 3" --nccl-id-file "$work/nccl.id" --timeout 20 --check
all_pass "opt_mlp_small (Megatron-LM, fused kernels) through an id file"
[ -s "$work/nccl.id" ] || fail "rank 0 wrote no id file"
! ls -d "$work"/pnc-* >/dev/null 2>&1 || fail "communicator directories left in $work"
prog=$sq

# A rank that goes away at its second NCCL group: the others end at once
# (the sockets close), each with exit 3, and whoever waited on rank 2
# names it and the call.
port=$(free_port)
start=$(date +%s)
for r in 0 1 2 3; do
    if [ $r = 2 ]; then e=PNC_HOST_EXIT=1; else e=PNC_HOST_EXIT=; fi
    { env $e "$sq" --rank $r --world-size 4 --master "127.0.0.1:$port" --timeout 60 --check \
        >"$work/rank-$r.txt" 2>&1; echo $? >"$work/rank-$r.rc"; } &
done
wait
[ $(($(date +%s) - start)) -lt 30 ] || fail "the peers of a rank that exited waited for the deadline"
ranked 2 9 ""
for r in 0 1 3; do ranked $r 3 "m: rank $r: nccl"; done
cat "$work"/rank-[013].txt | grep -qF "rank 2 closed its connection" ||
    { cat "$work"/rank-*.txt; fail "no rank named rank 2, which exited"; }

# A rank that stops answering at its first post: the others give up at
# the deadline (--timeout 2), naming the call; then the stalled rank is
# ended by the test.
port=$(free_port)
PRIME_FAULT=stall:2:0 "$sq" --rank 2 --world-size 4 --master "127.0.0.1:$port" --timeout 2 --check \
    >"$work/rank-2.txt" 2>&1 &
stalled=$!
PRIME_FAULT=stall:2:0 world "0 1 3" --master "127.0.0.1:$port" --timeout 2 --check
kill "$stalled"
wait "$stalled" 2>/dev/null
for r in 0 1 3; do ranked $r 3 "m: rank $r: "; done
cat "$work"/rank-[013].txt | grep -qF "ncclGroupEnd: not done within 2 s (ncclRecv from rank 2" ||
    { cat "$work"/rank-*.txt; fail "no rank gave up on rank 2 at the deadline"; }

port=$(free_port)
world "0 1 2" --master "127.0.0.1:$port" --timeout 2
ranked 0 4 "m: rank 0: accept: 3 of 4 ranks connected within 2 s (missing: 3)"
ranked 1 3 "m: rank 1: connect to 127.0.0.1:$port: rank 0 gave up waiting for the other ranks"

port=$(free_port)
world 2 --master "127.0.0.1:$port" --timeout 1
ranked 2 4 "m: rank 2: connect to 127.0.0.1:$port: connection refused after 1 s"

world 3 --nccl-id-file "$work/none.id" --timeout 1
ranked 3 4 "m: rank 3: open the NCCL id file $work/none.id: not there after 1 s"

echo "nccl host: PASS (worlds of one, refusals, worlds of 4 processes over TCP and an id file passing --check, a rank that exits, a rank that stalls, rendezvous deadlines)"
