#!/usr/bin/env python3
"""Step time of the OPT layer (examples/opt_layer.prime, 2 layers, 4
thread-devices) built by primec, Megatron and square plans, side by side
with the same layer in JAX/XLA on 4 host devices (Megatron sharding).

    python3 bench/step_xla.py [--primec build/compiler/primec] [--runs 5]
        [--repeat 3] [--shapes 512,512,8,64,2048 1024,1024,16,64,4096]
        [--venv build/xla-venv] [--no-xla] [--work build/bench-xla]

A shape is s,h,heads,head_dim,ffn. Each run is one process per program,
the programs alternating (primec Megatron, primec square, XLA) run after
run; each process steps --repeat times and reports its last step:

- primec: the span of the events of its --trace (the program traces its
  last iteration only), and per device the share of its kernel time spent
  in kernels that are GEMMs (those whose `--dump-after=kernels` IR has a
  GEMM node, their epilogue loops included);
- XLA: bench/opt_layer_jax.py's wall clock around one jitted step;
- both: the processor time of all the process's threads in that step
  (primec's --json timing.process_cpu_time of its median repeat, XLA's
  time.process_time()), which other work on the machine inflates far
  less than the wall time;
- primec: the same share of the kernels' processor time (their spans'
  `cpu_us`, the device thread's processor time, docs/timing.md): a span
  also holds the time its thread waited for a core, which on a machine
  with fewer cores than devices falls on whichever kernels were running,
  GEMMs and loops alike; the processor time does not;
- primec: the schedule overhead of its median repeat (--json
  timing.overhead_time over timing.wall_time: the executor's own time,
  neither in kernels nor blocked on communication, docs/timing.md).

The --json figures come from a run without --trace and the spans from a
second run with it (primec_step says why).

Prints the medians over the runs and the ratios primec / XLA Megatron.
jax[cpu] is installed from PyPI into the venv on first use (a benchmark
dependency only, never a build or test one).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = "param layers = 2, s = 16, h = 64, a = 8, e = 8, f = 256"
MODELS = ("opt_small_megatron", "opt_small_square")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def venv_python(venv):
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        run([sys.executable, "-m", "venv", venv])
    if subprocess.run([py, "-c", "import jax"], capture_output=True).returncode:
        run([py, "-m", "pip", "install", "-q", "jax[cpu]"])
    return py


AMBIGUOUS = set()  # old trace names of GEMM and loop phases alike (gemm_phases)


def warn_ambiguous(names):
    """Says which of a trace's kernel names stand for GEMM and loop phases."""
    bad = sorted(set(names) & AMBIGUOUS)
    if bad:
        print("warning: the trace names " + ", ".join(bad) + " stand for GEMM and loop phases "
              "alike (a primec before the names said the tensor); counted as loops",
              file=sys.stderr)


def gemm_phases(primec, model_file, model):
    """The trace names ("forward q_0", "gradient hd_1 -> dw1_1") of phases
    whose kernel has a GEMM. A backward or gradient phase's name says the
    tensor it writes, since an instance may have several (a weight's
    gradient, a GEMM, and its bias's, a loop). Programs of a primec that
    named them by the instance only ("gradient hd_1") match the old names
    too, where every phase of that name has a GEMM: a name that stands for
    a GEMM phase and a loop phase counts as a loop (with a warning), so
    that no loop kernel counts as a GEMM."""
    got = subprocess.run([primec, "check", model_file, "--model", model, "--dump-after=kernels"],
                         capture_output=True, text=True)
    if got.returncode:
        return None  # a primec without the kernels pass
    kinds, old, current = {}, {}, None  # trace name -> has a GEMM, per phase of that name
    for line in got.stdout.splitlines():
        m = re.match(r" phase \d+ (\w+) of (\S+): (\w+)\[", line)
        if m:
            kind, inst, tensor = m.groups()
            current = (f"{kind} {inst}" + ("" if kind == "forward" else f" -> {tensor}"),
                       f"{kind} {inst}")
            for names, n in ((kinds, current[0]), (old, current[1])):
                names.setdefault(n, []).append(False)
        elif line.startswith("  gemm") and current:
            kinds[current[0]][-1] = True
            old[current[1]][-1] = True
    AMBIGUOUS.update(n for n, v in old.items() if any(v) and not all(v))
    return {n for names in (kinds, old) for n, v in names.items() if all(v)}


def build(primec, shape, layers, work):
    s, h, a, e, f = shape
    d = os.path.join(work, "x".join(map(str, shape)))
    os.makedirs(d, exist_ok=True)
    src = open(os.path.join(ROOT, "examples", "opt_layer.prime")).read()
    params = f"param layers = {layers}, s = {s}, h = {h}, a = {a}, e = {e}, f = {f}"
    model_file = os.path.join(d, "model.prime")
    with open(model_file, "w") as fh:
        fh.write(src.replace(SMALL, params))
    progs = {}
    for model in MODELS:
        run([primec, "build", model_file, "--model", model, "-o", d])
        progs[model] = (os.path.join(d, model), gemm_phases(primec, model_file, model))
    return progs


def primec_step(exe, gemm, repeat):
    trace, js = exe + ".trace.json", exe + ".json"
    # The timing (processor time, schedule overhead) from a run without
    # --trace: the trace reads each thread's processor time at every
    # interval, a system call, and on a machine with fewer cores than
    # devices a thread whose time slice ran out during a kernel is taken
    # off its core there, outside the kernel, so its wait for a core
    # would count as the schedule's overhead. The spans and GEMM shares
    # from a second run, with --trace.
    run([exe, "--repeat", str(repeat), "--json", js])
    run([exe, "--repeat", str(repeat), "--trace", trace])
    with open(js) as fh:
        timing = json.load(fh)["timing"]
    cpu = timing["process_cpu_time"]
    over = timing["overhead_time"] / timing["wall_time"] if timing["wall_time"] else 0
    with open(trace) as fh:
        data = json.load(fh)
    ev = data["traceEvents"] if isinstance(data, dict) else data
    ev = [x for x in ev if x.get("ph", "X") == "X"]  # no metadata events
    start = min(x["ts"] for x in ev)
    end = max(x["ts"] + x["dur"] for x in ev)
    kern, gem, kcpu, gcpu = {}, {}, {}, {}
    for x in ev:
        kind = x["name"].split(" ")[0]
        if kind in ("forward", "backward", "gradient"):
            dev = x["pid"]  # a process per device; its threads are compute and transfers
            used = x.get("args", {}).get("cpu_us", float("nan"))
            kern[dev] = kern.get(dev, 0) + x["dur"]
            kcpu[dev] = kcpu.get(dev, 0) + used
            if gemm and x["name"] in gemm:
                gem[dev] = gem.get(dev, 0) + x["dur"]
                gcpu[dev] = gcpu.get(dev, 0) + used
    warn_ambiguous(x["name"] for x in ev)
    share = [gem.get(t, 0) / kern[t] if gemm is not None else float("nan") for t in sorted(kern)]
    cshare = [gcpu.get(t, 0) / kcpu[t] if gemm is not None and kcpu[t] else float("nan")
              for t in sorted(kern)]
    compute = [kern[t] / (end - start) for t in sorted(kern)]
    return (end - start) / 1e6, (share, cshare), compute, cpu, over


def xla_step(py, shape, layers, repeat):
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4",
               JAX_PLATFORMS="cpu")
    out = run([py, os.path.join(ROOT, "bench", "opt_layer_jax.py"), *map(str, shape),
               str(layers), str(repeat)], env=env).stdout
    got = json.loads(out.strip().splitlines()[-1])
    return got["step_s"][-1], got["cpu_s"][-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--primec", default=os.path.join(ROOT, "build", "compiler", "primec"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--shapes", nargs="+",
                    default=["512,512,8,64,2048", "1024,1024,16,64,4096"])
    ap.add_argument("--venv", default=os.path.join(ROOT, "build", "xla-venv"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench-xla"))
    ap.add_argument("--no-xla", action="store_true")
    args = ap.parse_args()
    py = None if args.no_xla else venv_python(args.venv)
    for text in args.shapes:
        shape = tuple(int(v) for v in text.split(","))
        progs = build(args.primec, shape, args.layers, args.work)
        steps = {m: [] for m in MODELS}
        shares = {m: [] for m in MODELS}
        computes = {m: [] for m in MODELS}
        cpus = {m: [] for m in MODELS}
        overs = {m: [] for m in MODELS}
        xla, xla_cpu = [], []
        for _ in range(args.runs):
            for m in MODELS:
                t, share, compute, cpu, over = primec_step(*progs[m], args.repeat)
                overs[m].append(over)
                steps[m].append(t)
                cpus[m].append(cpu)
                shares[m].append(share)
                computes[m].append(compute)
            if py:
                t, cpu = xla_step(py, shape, args.layers, args.repeat)
                xla.append(t)
                xla_cpu.append(cpu)
        print(f"shape s,h,heads,head_dim,ffn = {text}, {args.layers} layers, 4 devices, "
              f"medians of {args.runs} runs")
        ref = statistics.median(xla) if xla else None
        ref_cpu = statistics.median(xla_cpu) if xla_cpu else None
        if ref:
            print(f"  {'xla megatron':20s} step {ref * 1e3:9.1f} ms, processor {ref_cpu * 1e3:7.1f} ms")
        for m in MODELS:
            med = statistics.median(steps[m])
            share = [statistics.median(r[0][d] for r in shares[m]) for d in range(4)]
            cshare = [statistics.median(r[1][d] for r in shares[m]) for d in range(4)]
            comp = [statistics.median(r[d] for r in computes[m]) for d in range(4)]
            cpu = statistics.median(cpus[m])
            ratio = f" = {med / ref:5.2f}x xla" if ref else ""
            cratio = f" = {cpu / ref_cpu:5.2f}x xla" if ref_cpu else ""
            print(f"  {'primec ' + m.replace('opt_small_', ''):20s} step {med * 1e3:9.1f} ms{ratio}"
                  f", processor {cpu * 1e3:7.1f} ms{cratio}"
                  f"; GEMM share of kernel time per device "
                  + " ".join(f"{x:4.0%}" for x in share)
                  + " (of kernel processor time " + " ".join(f"{x:5.1%}" for x in cshare) + ")"
                  + "; kernel time / step " + " ".join(f"{x:4.0%}" for x in comp)
                  + f"; schedule overhead {statistics.median(overs[m]):4.0%}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
