#!/usr/bin/env python3
"""Predicted step time of OPT's batched layer with pipeline stages and
micro-batches (docs/plans.md, "Pipeline stages in the program").

It writes a .prime file that imports examples/opt_layer.prime and runs
plan megatron_dp (2 replicas of Megatron-LM on 2 devices) and the same
plan on 2 pipeline stages (megatron_pp_dp, 8 devices) with 1, 2, 4 and 8
micro-batches in GPipe's order and 4 and 8 in 1F1B's, at one shape (2 layers, b = 16 sequences of 512, hidden
1024, 16 heads, ffn 4096), and prices each program with `primec cost
--json` on a profile: the cost model simulates the program's own per-rank
action lists, so the stages overlap exactly as far as the program's
order of phases lets them.

    bench/pipeline_table.py [--primec build/compiler/primec] [--profile v100]

Prints a Markdown table on stdout.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

SHAPE = "layers = 2, b = 16, s = 512, h = 1024, a = 16, e = 64, f = 4096"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--primec", default="build/compiler/primec")
    ap.add_argument("--profile", default="v100")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    example = os.path.join(root, "examples", "opt_layer.prime")
    runs = [("megatron_dp", "megatron_dp(R = 2, P = 2)", 4, 1, 1, "-")]
    lines = ['import "%s";' % example, "shape bench of opt_b { param %s; }" % SHAPE]
    for m, order in ((1, "-"), (2, "gpipe"), (4, "gpipe"), (8, "gpipe"), (4, "1f1b"),
                     (8, "1f1b")):
        plan = "megatron_pp_dp"
        if m > 1:
            plan = "pp_mb%d_%s" % (m, order)
            lines.append("plan %s extends megatron_pp_dp { microbatches b: %d order %s; }"
                         % (plan, m, order))
        runs.append(("megatron_pp_dp", plan + "(S = 2, R = 2, P = 2)", 8, 2, m, order))
    for i, (_, call, _, _, _, _) in enumerate(runs):
        lines.append("run bench_%d = %s on bench;" % (i, call))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "pipeline.prime")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        print("| plan | devices | stages | micro-batches | order | step (ms) "
              "| compute per device (ms) | exposed (ms) | p2p bytes "
              "| peak memory per device (MB) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for i, (plan, _, ndev, stages, micro, order) in enumerate(runs):
            out = subprocess.run([args.primec, "cost", path, "--model", "bench_%d" % i,
                                  "--profile", args.profile, "--json"],
                                 capture_output=True, text=True)
            if out.returncode != 0:
                sys.stderr.write(out.stderr)
                return 1
            c = json.loads(out.stdout)
            b = c["bytes"]
            p2p = b.get("p2p", b.get("shift", 0) + b.get("redistribution", 0)) \
                if isinstance(b, dict) else b
            print("| %s | %d | %d | %d | %s | %.2f | %.2f | %.2f | %s | %.1f |"
                  % (plan, ndev, stages, micro, order, c["step_us"] / 1e3, c["compute_us"] / 1e3,
                     c["exposed_comm_us"] / 1e3, p2p, c["max_peak_bytes"] / 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
