#!/bin/sh
# tsan_runtime.sh SOURCE_DIR BUILD_DIR [CC]
#
# The threads runtime's unit tests under ThreadSanitizer (tests/hang.cmake):
# compiles runtime/ (threads backend) and tests/unit/test_runtime_{world,
# p2p,collective,kernels,deadline}.c with -fsanitize=thread into BUILD_DIR
# and runs each; any report fails the test. Exits 77 (skipped) with the
# reason when the compiler or the machine cannot run TSan programs.
# Prints PASS or FAIL with the reason last.
set -u
src=$1 out=$2 cc=${3:-cc}

fail() {
    echo "FAIL: $*"
    exit 1
}
skip() {
    echo "SKIP: $*"
    exit 77
}

mkdir -p "$out" || fail "cannot create $out"
printf 'int main(void) { return 0; }\n' >"$out/probe.c"
"$cc" -fsanitize=thread "$out/probe.c" -o "$out/probe" 2>"$out/probe.err" ||
    skip "$cc cannot build with -fsanitize=thread: $(head -1 "$out/probe.err")"
"$out/probe" 2>"$out/probe.err" || skip "TSan programs do not run here: $(head -1 "$out/probe.err")"
pkg-config --exists openblas cmocka jansson || skip "pkg-config finds no openblas, cmocka or jansson"

flags="-std=c11 -g -O1 -fsanitize=thread -I$src/runtime $(pkg-config --cflags openblas cmocka jansson)"
libs="$(pkg-config --libs openblas cmocka jansson) -lpthread -lm"
rt="abi.c collective.c device.c devops_host.c kernels.c prime_form.c prime_options.c prime_program.c prime_sched.c prime_timing.c prime_weights.c progress.c safetensors.c trace.c world_threads.c transport_threads.c collective_threads.c"
objs=""
for f in $rt; do
    o="$out/${f%.c}.o"
    # shellcheck disable=SC2086
    "$cc" $flags -c "$src/runtime/$f" -o "$o" || fail "cannot compile runtime/$f"
    objs="$objs $o"
done
for t in world p2p collective kernels deadline; do
    exe="$out/test_runtime_$t"
    # shellcheck disable=SC2086
    "$cc" $flags "$src/tests/unit/test_runtime_$t.c" $objs $libs -o "$exe" || fail "cannot build test_runtime_$t"
    # Both ways a message travels: copied by the thread that matches it
    # (the default for small ones), and by the communication thread with
    # waits that sleep at once (PRIME_INLINE_BYTES=0 PRIME_POLLS=0); and
    # collectives as rings of messages (PRIME_COLLECTIVES=ring) besides
    # the default, in shared memory.
    for mode in default queued ring; do
        case $mode in
        queued) env="PRIME_INLINE_BYTES=0 PRIME_POLLS=0" ;;
        ring) env="PRIME_COLLECTIVES=ring" ;;
        *) env="" ;;
        esac
        # shellcheck disable=SC2086
        env $env TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}" "$exe" >"$out/$t.log" 2>&1
        rc=$?
        if [ "$rc" -ne 0 ]; then
            cat "$out/$t.log"
            fail "test_runtime_$t ($mode) under TSan exited $rc"
        fi
        grep -q "WARNING: ThreadSanitizer" "$out/$t.log" && { cat "$out/$t.log"; fail "TSan report in test_runtime_$t ($mode)"; }
        echo "test_runtime_$t ($mode): clean"
    done
done
echo "PASS: runtime unit tests clean under ThreadSanitizer"
