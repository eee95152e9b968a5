#!/bin/bash
# tests/gpu/run.sh — the CUDA backend on a GPU, in one command, from a
# checkout of this repository (docs/gpu.md):
#
#   tests/gpu/run.sh [--build-dir DIR] [--no-configure] [--plan]
#
#   1. configures and builds primec (Release) in DIR (default build-gpu);
#   2. builds with `primec build --target cuda` the small OPT, Llama 2
#      and BLOOM layers on a 2x2 square grid (*_small_square) and on 4
#      devices with Megatron-LM (*_small_megatron), and the published
#      shapes' Megatron runs (opt_megatron, llama2_megatron,
#      bloom_megatron) for the timings;
#   3. runs each small one with --local --check (every device of the mesh
#      on the one GPU, the kernels fused across instances as one CUDA
#      kernel per group; results, gradients and counters checked), and
#      opt_small_megatron built with --dtype bf16 and --dtype f16;
#   4. runs one process per GPU over NCCL: a one-device model as a world
#      of one process (--check), and a two-device data-parallel model as
#      two processes meeting over TCP on 127.0.0.1 (--check; on two GPUs
#      where there are, else both on GPU 0, which NCCL refuses: that run
#      must then end with a message naming the rank and the call, not
#      hang). Worlds of 4 processes need 4 GPUs: they are checked on the
#      host emulation of NCCL only (ctest cuda/nccl-host, docs/cuda.md);
#   5. times the published runs (--local --repeat 5, no check) and cuBLAS
#      alone at the shapes of their GEMM nodes (tests/gpu/gemm_bench.cu);
#   6. writes DIR/gpu/results.md: the GPU, each check, each run's step
#      time, achieved TFLOP/s and kernel time, and the cuBLAS figures.
#
# --plan prints what it would build and run after checking that every run
# exists (no GPU needed; CI runs it); --no-configure uses DIR as it is.
# Exit codes: 0 every check passed; 1 a check or a step failed (each says
# which, and the summary lists them); 2 a bad command line or a missing
# tool; 77 no GPU (nothing run after the builds).
#
# Every step runs under `timeout` (a build 600 s, as many at once as there
# are processors), so a hang is a failure, not a stall;
# the whole is meant to take under 8 minutes on one H200.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$root/build-gpu
configure=1
plan=0
while [ $# -gt 0 ]; do
    case $1 in
    --build-dir)
        [ $# -ge 2 ] || { echo "run.sh: --build-dir needs a directory" >&2; exit 2; }
        build=$(mkdir -p "$2" && cd "$2" && pwd)
        shift 2
        ;;
    --no-configure) configure=0; shift ;;
    --plan) plan=1; shift ;;
    -h | --help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done

say() { printf '%s\n' "$*"; }
die() { printf 'run.sh: FAIL: %s\n' "$*" >&2; exit "${2:-1}"; }

# family:file — the small runs checked and the published run timed.
families="opt:opt_layer llama2:llama2_layer bloom:bloom_layer"
check_runs=""
bench_runs=""
for f in $families; do
    fam=${f%%:*} file=${f#*:}
    check_runs="$check_runs $file:${fam}_small_square $file:${fam}_small_megatron"
    bench_runs="$bench_runs $file:${fam}_megatron"
done
# The small OPT layer with bf16 and f16 GEMM operands (--dtype, docs/cuda.md):
# file:model@dtype, built into DIR/gpu/model-dtype.
dtype_runs="opt_layer:opt_small_megatron@bf16 opt_layer:opt_small_megatron@f16"
# One process per GPU over NCCL: the models of tests/cuda/.
nccl_runs="one_device two_devices"

nvcc=$(command -v nvcc || true)
[ -n "$nvcc" ] || { [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc; } || true
[ -n "$nvcc" ] || die "nvcc not found on PATH nor in /usr/local/cuda/bin" 2
command -v cmake >/dev/null || die "cmake not found" 2
command -v timeout >/dev/null || die "timeout (coreutils) not found" 2

if [ $configure -eq 1 ]; then
    say "== configure and build primec in $build"
    timeout 120 cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >"$build.configure.log" 2>&1 ||
        { tail -20 "$build.configure.log"; die "cmake configure (log: $build.configure.log)"; }
    timeout 300 cmake --build "$build" -j"$(nproc)" --target primec >"$build.build.log" 2>&1 ||
        { tail -30 "$build.build.log"; die "cmake --build (log: $build.build.log)"; }
fi
primec=$build/compiler/primec
[ -x "$primec" ] || die "no primec in $build (build it, or drop --no-configure)" 2
"$primec" --print-paths | grep -q '^cuda runtime library: /' ||
    die "this primec was built without the CUDA runtime (prime_rt_cuda): is nvcc found by cmake?" 2

# Every run must exist (primec check names it).
for entry in $check_runs $bench_runs $dtype_runs; do
    file=$root/examples/${entry%%:*}.prime model=${entry#*:}
    model=${model%@*}
    timeout 60 "$primec" check "$file" --model "$model" >/dev/null 2>&1 ||
        die "$model of ${entry%%:*}.prime does not check"
done
for model in $nccl_runs; do
    timeout 60 "$primec" check "$root/tests/cuda/$model.prime" --model "$model" >/dev/null 2>&1 ||
        die "$model of tests/cuda/$model.prime does not check"
done
if [ $plan -eq 1 ]; then
    say "run.sh plan (primec $primec, nvcc $nvcc):"
    for entry in $check_runs; do say "  check  ${entry#*:} (examples/${entry%%:*}.prime) --local --check"; done
    for entry in $dtype_runs; do
        m=${entry#*:}
        say "  check  ${m%@*} (examples/${entry%%:*}.prime) --dtype ${m#*@} --local --check"
    done
    for entry in $bench_runs; do say "  time   ${entry#*:} (examples/${entry%%:*}.prime) --local --repeat 5"; done
    say "  cuBLAS alone at the GEMM shapes of the timed runs (tests/gpu/gemm_bench.cu)"
    say "  nccl   one_device (tests/cuda/one_device.prime) --check: a world of one process"
    say "  nccl   two_devices (tests/cuda/two_devices.prime) --check: 2 processes over TCP on 127.0.0.1"
    say "run.sh: plan PASS"
    exit 0
fi

out=$build/gpu
mkdir -p "$out"
results=$out/results.md
failed=""
fail() { say "FAIL: $*"; failed="$failed
- $*"; }

say "== build the programs (primec build --target cuda) in $out, $(nproc) at a time"
# build_one MODEL FILE [DTYPE]: primec build (with --dtype DTYPE, into
# MODEL-DTYPE) under a timeout, saying so when it ran out.
build_one() {
    rc=0 name=$1${3:+-$3}
    timeout 600 "$primec" build "$2" --model "$1" --target cuda ${3:+--dtype "$3"} -o "$out/$name" \
        >"$out/$name.build.log" 2>&1 || rc=$?
    [ $rc -ne 124 ] || echo "run.sh: timed out after 600 s" >>"$out/$name.build.log"
    return $rc
}
pids=""
running=0
for entry in $check_runs $bench_runs $dtype_runs nccl:one_device nccl:two_devices; do
    if [ $running -ge "$(nproc)" ]; then
        for p in $pids; do
            wait "${p%%:*}" || fail "build of ${p#*:} (log: $out/${p#*:}.build.log)"
        done
        pids="" running=0
    fi
    src=$root/examples/${entry%%:*}.prime
    [ "${entry%%:*}" != nccl ] || src=$root/tests/cuda/${entry#*:}.prime
    m=${entry#*:} dt=
    case $m in *@*) dt=${m#*@} m=${m%@*} ;; esac
    build_one "$m" "$src" $dt &
    pids="$pids $!:$m${dt:+-$dt}"
    running=$((running + 1))
done
for p in $pids; do
    wait "${p%%:*}" || fail "build of ${p#*:} (log: $out/${p#*:}.build.log)"
done
timeout 120 "$nvcc" -O2 -Werror all-warnings -gencode arch=compute_80,code=sm_80 \
    -gencode arch=compute_90,code=sm_90 "$here/gemm_bench.cu" -lcublas -o "$out/gemm_bench" \
    >"$out/gemm_bench.build.log" 2>&1 || fail "build of gemm_bench (log: $out/gemm_bench.build.log)"

gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1 || true)
if [ -z "$gpu" ]; then
    say "SKIP: no GPU (nvidia-smi finds none); the programs were built, nothing was run"
    [ -z "$failed" ] || die "and some builds failed:$failed"
    exit 77
fi

{
    say "# CUDA backend on $gpu"
    say ""
    say "Written by tests/gpu/run.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)."
    say ""
    say "## --local --check (every device of the mesh on this GPU)"
    say ""
} >"$results"

for entry in $check_runs $dtype_runs; do
    m=${entry#*:}
    model=${m%@*} name=${m%@*}
    case $m in *@*) name=$model-${m#*@} ;; esac
    exe=$out/$name/$model
    [ -x "$exe" ] || { fail "$name was not built"; continue; }
    say "== $name --local --check"
    rc=0
    timeout 120 "$exe" --local --check --timeout 60 --json "$out/$name.json" \
        --trace "$out/$name.trace.json" >"$out/$name.log" 2>&1 || rc=$?
    tail -3 "$out/$name.log"
    if [ $rc -eq 0 ] && grep -q '^check passed' "$out/$name.log"; then
        say "- $name: check passed, $(grep -o 'time per training step[^,]*' "$out/$name.log")" >>"$results"
        # The trace's device row: every kernel from its CUDA events.
        python3 "$root/tests/cuda/device_trace.py" --gpu "$out/$name.trace.json" >>"$results" 2>&1 ||
            fail "$name --trace: the device row (tests/cuda/device_trace.py --gpu)"
    else
        fail "$name --local --check (exit $rc, log: $out/$name.log)"
        say "- $name: FAILED (exit $rc)" >>"$results"
    fi
done

{
    say ""
    say "## One process per GPU over NCCL"
    say ""
} >>"$results"
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
exe=$out/one_device/one_device
if [ -x "$exe" ]; then
    say "== one_device --check (a world of one process over NCCL)"
    rc=0
    timeout 120 "$exe" --check --timeout 60 >"$out/one_device.log" 2>&1 || rc=$?
    tail -3 "$out/one_device.log"
    if [ $rc -eq 0 ] && grep -q '^check passed' "$out/one_device.log"; then
        say "- one_device, a world of one process: check passed" >>"$results"
    else
        fail "one_device --check over NCCL (exit $rc, log: $out/one_device.log)"
        say "- one_device, a world of one process: FAILED (exit $rc)" >>"$results"
    fi
else
    fail "one_device was not built"
fi
exe=$out/two_devices/two_devices
if [ -x "$exe" ]; then
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    gpu1=1
    [ "$ngpus" -ge 2 ] || gpu1=0
    say "== two_devices --check: 2 processes over NCCL (GPUs 0 and $gpu1)"
    for r in 0 1; do
        lr=0
        [ $r -eq 0 ] || lr=$gpu1
        { rc=0; RANK=$r WORLD_SIZE=2 LOCAL_RANK=$lr MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            timeout 120 "$exe" --check --timeout 60 >"$out/two_devices.$r.log" 2>&1 || rc=$?
          echo $rc >"$out/two_devices.$r.rc"; } &
    done
    wait
    rc0=$(cat "$out/two_devices.0.rc") rc1=$(cat "$out/two_devices.1.rc")
    tail -3 "$out/two_devices.0.log" "$out/two_devices.1.log"
    if [ "$gpu1" -eq 1 ]; then
        if [ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ] && grep -q '^check passed' "$out/two_devices.0.log"; then
            say "- two_devices, 2 processes on 2 GPUs: check passed" >>"$results"
        else
            fail "two_devices over NCCL (exits $rc0 $rc1, logs: $out/two_devices.[01].log)"
            say "- two_devices, 2 processes on 2 GPUs: FAILED (exits $rc0 $rc1)" >>"$results"
        fi
    elif [ "$rc0" -ne 0 ] && [ "$rc0" -ne 124 ] && [ "$rc1" -ne 124 ] &&
        grep -q 'rank [01]: nccl' "$out/two_devices.0.log" "$out/two_devices.1.log"; then
        say "- two_devices, 2 processes on one GPU: refused as NCCL refuses two ranks on one GPU (exits $rc0 $rc1): $(grep -h 'rank [01]: nccl' "$out/two_devices.0.log" "$out/two_devices.1.log" | head -1)" >>"$results"
    elif [ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ] && grep -q '^check passed' "$out/two_devices.0.log"; then
        say "- two_devices, 2 processes on one GPU: check passed" >>"$results"
    else
        fail "two_devices on one GPU: neither passed nor a clean refusal (exits $rc0 $rc1, logs: $out/two_devices.[01].log)"
        say "- two_devices, 2 processes on one GPU: FAILED (exits $rc0 $rc1)" >>"$results"
    fi
else
    fail "two_devices was not built"
fi

{
    say ""
    say "## Published shapes, Megatron-LM on 4 virtual devices (--local --repeat 5)"
    say ""
    say "| run | step time (s) | achieved TFLOP/s | kernel time (s) | exposed comm (s) |"
    say "|---|---|---|---|---|"
} >>"$results"
shapes=$out/gemm_shapes.txt
: >"$shapes"
for entry in $bench_runs; do
    model=${entry#*:}
    exe=$out/$model/$model
    [ -x "$exe" ] || { fail "$model was not built"; continue; }
    grep -o 'gemm m [0-9]* n [0-9]* k [0-9]* batch [0-9]* trans [01][01]' "$out/$model/$model.cu" |
        awk '{print $3, $5, $7, $9, substr($11,1,1), substr($11,2,1)}' >>"$shapes" || true
    say "== $model --local --repeat 5"
    rc=0
    timeout 150 "$exe" --local --repeat 5 --timeout 120 --json "$out/$model.json" >"$out/$model.log" 2>&1 || rc=$?
    tail -2 "$out/$model.log"
    if [ $rc -ne 0 ]; then
        fail "$model --local --repeat 5 (exit $rc, log: $out/$model.log)"
        say "| $model | failed (exit $rc) | | | |" >>"$results"
        continue
    fi
    python3 - "$out/$model.json" "$model" >>"$results" <<'EOF' || fail "reading $out/$model.json"
import json, sys
t = json.load(open(sys.argv[1]))["timing"]
print("| %s | %.6f | %.2f | %.6f | %.6f |" % (sys.argv[2], t["wall_time"], t["gflops"] / 1e3,
      t["kernel_time"], t["exposed_comm_time"]))
EOF
done

{
    say ""
    say "## cuBLAS alone at the timed runs' GEMM shapes (median of 10 calls)"
    say ""
} >>"$results"
if [ -x "$out/gemm_bench" ] && [ -s "$shapes" ]; then
    sort -u "$shapes" | timeout 120 "$out/gemm_bench" >"$out/gemm_bench.log" 2>&1 ||
        fail "gemm_bench (log: $out/gemm_bench.log)"
    sed 's/^/- /' "$out/gemm_bench.log" >>"$results"
fi

say "== results in $results"
cat "$results"
[ -z "$failed" ] || die "these failed:$failed"
say "run.sh: PASS"
