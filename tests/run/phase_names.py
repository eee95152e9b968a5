#!/usr/bin/env python3
"""The names of a program's phases say which kernel ran (docs/timing.md,
docs/kernels.md "The GEMM share, counted"): the trace and the report name
each kernel after its phase, and bench/step_xla.py counts a kernel as a
GEMM by that name, so a name shared by a GEMM phase and a loop phase
(an instance's weight gradient and its bias's) would count the loop as a
GEMM.

    phase_names.py PRIMEC MODEL_FILE MODEL WORK

Builds MODEL, reads its emitted phase table and its --dump-after=kernels,
and checks that every compute phase is named "forward INST", or for a
backward or gradient phase "KIND INST -> TENSOR" with the tensor it
writes (a phase of a repeated layer's copy runs the table of the phase
it copies, and has no name of its own); that no name stands for a GEMM phase and a loop phase; and that
the model has an instance with both (else the case shows nothing). Then
runs the program with --trace and checks that every kernel span carries
its processor time (0 <= cpu_us <= dur) under one of those names, and
prints the GEMM share of each device's kernel time both ways.
"""
import json
import os
import re
import subprocess
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    primec, model_file, model, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    subprocess.run([primec, "build", model_file, "--model", model, "-o", work], check=True,
                   capture_output=True)
    exe = os.path.join(work, model)
    with open(exe + ".c") as fh:
        emitted = dict((int(n), name) for n, name in
                       re.findall(r'static const PrimePhase phase(\d+) = \{"([^"]*)"', fh.read()))
    dump = subprocess.run([primec, "check", model_file, "--model", model, "--dump-after=kernels"],
                          check=True, capture_output=True, text=True).stdout
    phases, current = {}, None  # index -> [kind, instance, tensor, has a GEMM]
    for line in dump.splitlines():
        m = re.match(r" phase (\d+) (\w+) of (\S+): (\w+)\[", line)
        if m:
            current = int(m.group(1))
            phases[current] = [m.group(2), m.group(3), m.group(4), False]
        elif line.startswith("  gemm") and current is not None:
            phases[current][3] = True
    if not phases:
        fail("the dump has no compute phase")
    kinds = {}  # name -> the GEMM flags of its phases
    for p, (kind, inst, tensor, gemm) in sorted(phases.items()):
        if p not in emitted:
            continue  # a copy of a repeated layer's phase: it runs that phase's table
        want = f"forward {inst}" if kind == "forward" else f"{kind} {inst} -> {tensor}"
        if emitted[p] != want:
            fail(f"phase {p} is named {emitted[p]!r}, not {want!r}")
        kinds.setdefault(want, set()).add(gemm)
    mixed = sorted(n for n, v in kinds.items() if len(v) > 1)
    if mixed:
        fail("names of GEMM and loop phases alike: " + ", ".join(mixed))
    both = sorted({inst for kind, inst, _, gemm in phases.values() if gemm and kind != "forward"}
                  & {inst for kind, inst, _, gemm in phases.values()
                     if not gemm and kind != "forward"})
    if not both:
        fail("no instance has both a GEMM and a loop backward or gradient phase")
    print("instances with GEMM and loop phases, told apart by name:", " ".join(both))

    trace = exe + ".trace.json"
    subprocess.run([exe, "--repeat", "1", "--trace", trace], check=True, capture_output=True)
    with open(trace) as fh:
        ev = [x for x in json.load(fh)["traceEvents"] if x["ph"] == "X" and x["tid"] == 0]
    names = set(emitted.values())
    wall, cpu = {}, {}
    for x in ev:
        used = x.get("args", {}).get("cpu_us")
        if used is None or used < 0 or used > x["dur"] + 0.001:
            fail(f"span {x['name']!r}: cpu_us {used!r} not within its {x['dur']} us")
        if x["name"] == "step":
            continue
        if x["name"] not in names:
            fail(f"kernel span {x['name']!r} names no phase")
        gemm = kinds.get(x["name"], {False}) == {True}
        for acc, v in ((wall, x["dur"]), (cpu, used)):
            t = acc.setdefault(x["pid"], [0.0, 0.0])
            t[0] += v
            t[1] += v if gemm else 0.0
    for dev in sorted(wall):
        w, c = wall[dev], cpu[dev]
        print(f"device {dev}: GEMM share of kernel spans {w[1] / w[0]:.1%}, "
              f"of kernel processor time {c[1] / c[0] if c[0] else float('nan'):.1%}")
    print("phase names: PASS")


if __name__ == "__main__":
    main()
