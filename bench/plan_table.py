#!/usr/bin/env python3
"""Planner table: for each published-shape example model, plan it on N
devices and compare with its pinned (Megatron-LM) partitions given their
best mesh and data-parallel degree, under the same cost model.

    bench/plan_table.py [--primec build-rel/compiler/primec] [--profile v100]
                        [--elem-bytes 2] [--repeat 5] [--set layers|mlp]

--set layers (default): one decoder layer of OPT-175B, Llama-2-70B and
BLOOM-176B (batch of one sequence) on 4, 8, 16, 32 and 4096 devices.
--set mlp: OPT-175B's MLP block with a batch of 1, 8 and 32 sequences
(examples/opt_mlp.prime) on 8, 16 and 32 devices.

Prints a Markdown table: the throughput ratio (planned / Megatron) under
the search's own estimate (instances priced one by one plus conversions
between them), and with both plans scheduled as one program each (what
`primec build` would run, data-parallel all-reduce added): throughput,
collective time, collective bytes and memory ratios (memory with
mixed-precision Adam state), and the share of Megatron's step spent in
collectives; and the planner's search time (median of --repeat runs, one
thread).
"""
import argparse
import json
import statistics
import subprocess

MODELS = [
    ("OPT-175B layer", "examples/opt_layer.prime", "opt_megatron"),
    ("Llama-2-70B layer", "examples/llama2_layer.prime", "llama2_megatron"),
    ("BLOOM-176B layer", "examples/bloom_layer.prime", "bloom_megatron"),
]

MLP_MODELS = [
    ("OPT-175B MLP, batch 1", "examples/opt_mlp.prime", "opt_mlp_b1"),
    ("OPT-175B MLP, batch 8", "examples/opt_mlp.prime", "opt_mlp_b8"),
    ("OPT-175B MLP, batch 32", "examples/opt_mlp.prime", "opt_mlp_b32"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--primec", default="build-rel/compiler/primec")
    ap.add_argument("--profile", default="v100")
    ap.add_argument("--elem-bytes", default="2")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--devices", default=None)
    ap.add_argument("--set", choices=["layers", "mlp"], default="layers")
    args = ap.parse_args()
    models = MODELS if args.set == "layers" else MLP_MODELS
    if args.devices is None:
        args.devices = "4,8,16,32,4096" if args.set == "layers" else "8,16,32"
    print("| model | devices | plan (mesh x dp) | search estimate vs Megatron | search optimum as one program | chosen as one program: throughput | collective time | collective bytes | memory | Megatron's collective share | search ms (median) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    ratios, exact_ratios = {}, {}
    for title, path, model in models:
        for n in [int(x) for x in args.devices.split(",")]:
            times, last = [], None
            for _ in range(args.repeat):
                out = subprocess.run([args.primec, "plan", path, "--model", model, "--devices", str(n),
                                      "--profile", args.profile, "--elem-bytes", args.elem_bytes, "--json"],
                                     capture_output=True, text=True, check=True)
                last = json.loads(out.stdout)
                times.append(last["search_ms"])
            mesh = " x ".join(str(a["size"]) for a in last["mesh"])
            search, pinned = last["search"], last["pinned"]
            thr = pinned["time_s"] / search["time_s"]
            search_exact = pinned["schedule"]["time_s"] / search["schedule"]["time_s"]
            ex, base = last["schedule"], pinned["schedule"]
            ex_thr = base["time_s"] / ex["time_s"]
            coll = ex["collective_bytes"] / base["collective_bytes"] if base["collective_bytes"] else float("nan")
            ctime = ex["collective_time_s"] / base["collective_time_s"] if base["collective_time_s"] else float("nan")
            share = base["collective_time_s"] / base["time_s"]
            mem = ex["memory_bytes"] / base["memory_bytes"] if base["memory_bytes"] else float("nan")
            ratios.setdefault(n, []).append(thr)
            exact_ratios.setdefault(n, []).append(ex_thr)
            print("| %s | %d | (%s) x %d%s | %.2fx | %.2fx | %.2fx | %.2f | %.2f | %.2f | %.0f%% | %.1f |" % (
                title, n, mesh, last["dp"], " (pinned kept)" if last["chosen"] == "pinned" else "",
                thr, search_exact, ex_thr, ctime, coll, mem, 100 * share, statistics.median(times)))
    for n, r in sorted(ratios.items()):
        print("\ngeometric mean throughput ratio on %d devices: search estimate %.2fx, chosen plan as one program %.2fx"
              % (n, statistics.geometric_mean(r), statistics.geometric_mean(exact_ratios[n])), end="")
    print()


if __name__ == "__main__":
    main()
