#!/usr/bin/env python3
"""Two builds of the same programs, run alternately, compared by their own
--json timing: processor time (timing.process_cpu_time of the median
repeat), step time, and the shares of the step spent in kernels and in
schedule overhead (docs/timing.md).

    python3 bench/ab_programs.py DIR_A DIR_B [--runs 5] [--repeat 3]
        [--programs opt_small_megatron opt_small_square] [--env A|B NAME=VALUE ...]

DIR_A and DIR_B hold the programs (as bench/step_xla.py --work leaves
them: build/bench-xla/512x512x8x64x2048). Each run starts every program
once from each directory, A then B, so both see the same load; the
medians over the runs are printed with the ratio B / A. On a machine
shared with other work the processor time is the figure to compare (the
wall time measures the load as much as the programs).

--env A NAME=VALUE sets a variable for the programs of A only (B, for
B's), so one build can be compared with itself under two settings
(PRIME_TILE_FILL=eager against the default, say).
"""
import argparse
import json
import os
import statistics
import subprocess


def run_once(exe, repeat, env):
    js = exe + ".ab.json"
    subprocess.run([exe, "--repeat", str(repeat), "--json", js], check=True,
                   capture_output=True, env=env)
    with open(js) as fh:
        t = json.load(fh)["timing"]
    wall = t["wall_time"]
    return {
        "cpu": t["process_cpu_time"],
        "step": wall,
        "kernel": t["kernel_time"] / wall if wall else 0,
        "overhead": t["overhead_time"] / wall if wall else 0,
        "filled": t.get("tiles_filled", -1),
        "unfilled": t.get("tiles_unfilled", -1),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--programs", nargs="+", default=["opt_small_megatron", "opt_small_square"])
    ap.add_argument("--env", nargs=2, action="append", default=[], metavar=("SIDE", "NAME=VALUE"))
    args = ap.parse_args()
    envs = {"A": dict(os.environ), "B": dict(os.environ)}
    for side, kv in args.env:
        name, _, value = kv.partition("=")
        envs[side.upper()][name] = value
    got = {(p, s): [] for p in args.programs for s in "AB"}
    for _ in range(args.runs):
        for p in args.programs:
            for side, d in (("A", args.a), ("B", args.b)):
                got[(p, side)].append(run_once(os.path.join(d, p), args.repeat, envs[side]))
    print(f"medians of {args.runs} runs, --repeat {args.repeat}; A = {args.a}, B = {args.b}")
    for p in args.programs:
        med = {}
        for side in "AB":
            rows = got[(p, side)]
            med[side] = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        for side in "AB":
            m = med[side]
            print(f"  {p:20s} {side}: processor {m['cpu'] * 1e3:8.1f} ms, step "
                  f"{m['step'] * 1e3:8.1f} ms, kernels {m['kernel']:4.0%}, overhead "
                  f"{m['overhead']:4.0%}, tiles filled {m['filled']:.0f} / unfilled "
                  f"{m['unfilled']:.0f}")
        print(f"  {p:20s} B / A: processor {med['B']['cpu'] / med['A']['cpu']:5.3f}x, step "
              f"{med['B']['step'] / med['A']['step']:5.3f}x")


if __name__ == "__main__":
    main()
