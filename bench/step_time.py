#!/usr/bin/env python3
"""Per-step time and schedule overhead of built programs on the cpu target
(docs/timing.md).

Builds each model, runs it --runs times with --repeat R --json, and prints
a Markdown table of the run with the median step time (each run reports
the median over its --repeat): the training step's wall time, GFLOP/s,
and per device the time in kernels, the exposed communication and the
schedule overhead, with their shares of the step.

    bench/step_time.py [--primec build/compiler/primec] [--repeat 50]
                       [--runs 5] [--env NAME=VALUE ...]
                       [--param NAME=VALUE ...] [MODEL ...]

A MODEL is FILE.prime:NAME, or FILE.prime:NAME:MESH to build the model
with its mesh(...) replaced by mesh(MESH) (e.g. "i: 4, j: 4"); --param
sets a parameter of every model's `param` line (e.g. h=512). Without
models: opt_small_megatron and opt_small_square of examples/opt_layer.prime
and the square matmul of examples/matmul_square.prime on 4 x 4.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

DEFAULT = [
    "examples/opt_layer.prime:opt_small_megatron",
    "examples/opt_layer.prime:opt_small_square",
    "examples/matmul_square.prime:matmul_square:i: 4, j: 4",
]


def build(primec, spec, params, work):
    parts = spec.split(":", 2)
    path, model = parts[0], parts[1]
    if len(parts) == 3 or params:
        text = open(path).read()
        start = re.search(r"^model %s \{" % re.escape(model), text, re.M).start()
        head, body = text[:start], text[start:]
        if len(parts) == 3:
            body = re.sub(r"mesh\([^)]*\)", "mesh(%s)" % parts[2], body, count=1)
        for kv in params:
            k, _, v = kv.partition("=")
            body = re.sub(r"(param[^;]*\b%s = )\d+" % re.escape(k), r"\g<1>%s" % v, body, count=1)
        path = os.path.join(work, "%s.prime" % model)
        with open(path, "w") as f:
            f.write(head + body)
    out = subprocess.run([primec, "build", path, "--model", model, "-o", work],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise SystemExit("primec build failed for %s" % spec)
    return out.stdout.strip().splitlines()[-1]


def measure(exe, repeat, runs, env, work):
    rows = []
    js = os.path.join(work, "run.json")
    for _ in range(runs):
        subprocess.run([exe, "--repeat", str(repeat), "--json", js], check=True,
                       stdout=subprocess.DEVNULL, env=env)
        rows.append(json.load(open(js))["timing"])
    # The run with the median step time (the lower middle one for an even
    # count), whole, so that its parts stay consistent with its step.
    rows.sort(key=lambda r: r["wall_time"])
    return rows[(len(rows) - 1) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--primec", default="build/compiler/primec")
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--param", action="append", default=[])
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    env = dict(os.environ)
    for kv in a.env:
        k, _, v = kv.partition("=")
        env[k] = v
    print("| model | step ms | GFLOP/s | kernels ms (%) | exposed comm ms (%) | overhead ms (%) |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for spec in a.models or DEFAULT:
            exe = build(a.primec, spec, a.param, work)
            m = measure(exe, a.repeat, a.runs, env, work)
            w = m["wall_time"]
            share = lambda k: "%.3f (%.0f%%)" % (m[k] * 1e3, 100 * m[k] / w if w else 0)
            parts = spec.split(":", 2)
            name = parts[1] + (" on mesh(%s)" % parts[2] if len(parts) == 3 else "")
            name += "".join(", " + p for p in a.param)
            print("| %s | %.3f | %.3g | %s | %s | %s |" % (name, w * 1e3, m["gflops"],
                  share("kernel_time"), share("exposed_comm_time"), share("overhead_time")))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
