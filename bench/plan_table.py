#!/usr/bin/env python3
"""Planner table: for each published-shape example model, plan it on N
devices and compare with its pinned (Megatron-LM) partitions given their
best mesh and data-parallel degree, under the same cost model.

    bench/plan_table.py [--primec build-rel/compiler/primec] [--profile v100]
                        [--elem-bytes 2] [--repeat 5] [--set layers|mlp|training]
                        [--shard-optimizer] [--uneven-stages] [--batched]

--set training: whole models trained (`primec plan --training`): OPT,
Llama 2 and BLOOM at ~7B and at their largest published size, on 8, 16
and 32 V100s (4 per node) and 32 and 256 H100s (8 per node). For each,
the best plan over every partition (tensor plan x pipeline stages x data
parallelism x micro-batch x recomputation) against the best Megatron-LM
3D plan (Megatron's own partitions, the same search), both under the same
iteration model: throughput, collective time, collective bytes and peak
memory ratios, and the search time. Ends with `geomean SET: R.RRx` per
device set (over the rows where both plans fit the devices' memory).
With --shard-optimizer both searches shard the optimizer state and step
over the data-parallel replicas (ZeRO-1, `primec plan --shard-optimizer`).
With --uneven-stages both searches also take stage counts that do not
divide the layers (`primec plan --uneven-stages`: the first L mod p
stages hold one layer more). With --batched both plan the layers with a
batch dimension (`opt_b`, `llama2_b`, `bloom_b`; Megatron-LM as
`megatron_dp` and `megatron_sp_dp` with one replica axis of size 1).

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
import os
import re
import statistics
import subprocess
import tempfile

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


# Whole models: title, example file, model, shape parameters, layers,
# vocabulary, global batch (sequences; the published training runs':
# OPT 2M tokens, Llama 2 4M tokens, BLOOM 512 and 2048 sequences).
TRAIN_MODELS = [
    ("OPT-6.7B", "examples/opt_layer.prime", "opt", "megatron",
     "s = 2048, h = 4096, a = 32, e = 128, f = 16384", 32, 50272, 1024),
    ("OPT-175B", "examples/opt_layer.prime", "opt", "megatron",
     "s = 2048, h = 12288, a = 96, e = 128, f = 49152", 96, 50272, 1024),
    ("Llama-2-7B", "examples/llama2_layer.prime", "llama2", "megatron",
     "s = 4096, h = 4096, g = 32, r = 1, e = 128, c = 2, p = 64, f = 11008", 32, 32000, 1024),
    ("Llama-2-70B", "examples/llama2_layer.prime", "llama2", "megatron",
     "s = 4096, h = 8192, g = 8, r = 8, e = 128, c = 2, p = 64, f = 28672", 80, 32000, 1024),
    ("BLOOM-7B1", "examples/bloom_layer.prime", "bloom", "megatron",
     "s = 2048, h = 4096, a = 32, e = 128, f = 16384", 30, 250880, 512),
    ("BLOOM-176B", "examples/bloom_layer.prime", "bloom", "megatron",
     "s = 2048, h = 14336, a = 112, e = 128, f = 57344", 70, 250880, 2048),
]

# Device sets: name, profile, devices.
TRAIN_SETS = [
    ("v100-8", "v100", 8),
    ("v100-16", "v100", 16),
    ("v100-32", "v100", 32),
    ("h100-32", "h100", 32),
    ("h100-256", "h100", 256),
]


# Device memory of the profiles (mem_capacity_GB), the default limit.
MEMORY = {"v100": 34.36e9, "h100": 85.9e9}


def plan_text(p):
    # The layer's first instance and its output (the instance before the
    # loss) in different partitions: a conversion between consecutive
    # layers that the search does not price (marked *).
    uses = p["instances"]
    mark = "" if uses[0]["use"] == uses[-2]["use"] else " *"
    return "%s x %d x %d, b %d%s%s" % (p["mesh"], p["stages"], p["replicas"], p["micro_batch"],
                                       ", rc" if p["recompute"] else "", mark)


# The terms of an iteration (cost_pipeline.h), seconds, from a plan's
# JSON: iteration = compute + exposed communication inside the layers
# (collectives and shifts the schedule does not hide) + conversions
# between instances + stage sends + bubble + gradient all-reduce +
# optimizer step (compute includes a recomputed forward and the LM head).
def terms(p):
    c = p["pipeline"]
    m = c["micro_batches"]
    path = (c["pipeline_us"] - c["bubble_us"] - m * c["p2p_us"]) * 1e-6
    return {
        "compute": path - p["layer_exposed_comm_s"] - p["conversion_time_s"],
        "exposed layer communication": p["layer_exposed_comm_s"],
        "conversions": p["conversion_time_s"],
        "stage sends": m * c["p2p_us"] * 1e-6,
        "bubble": c["bubble_us"] * 1e-6,
        "gradient all-reduce": (c["allreduce_us"] + c["embedding_us"]) * 1e-6,
        "optimizer step": c["optimizer_us"] * 1e-6,
    }


def shape(p):
    return (p["mesh"], p["stages"], p["replicas"], p["micro_batch"], p["recompute"])


def explain_row(s, m, memory_limit):
    """Why primec's plan s wins or ties against Megatron's m: the term of
    the iteration whose difference decides, from the planner's own
    breakdown, and what differs in the shapes (stages, micro-batch,
    recomputation) and memory."""
    ts, tm = terms(s), terms(m)
    diff = {k: tm[k] - ts[k] for k in ts}
    total = m["iteration_s"] - s["iteration_s"]
    if [u["use"] for u in s["instances"]] == [u["use"] for u in m["instances"]] and shape(s) == shape(m):
        return "tie: the same plan"
    key = max(diff, key=lambda k: abs(diff[k]))
    parts = []
    for k in sorted(diff, key=lambda k: -abs(diff[k]))[:2]:
        if abs(diff[k]) >= 0.0005 * m["iteration_s"]:
            parts.append("%s %+.1f%%" % (k, -100 * diff[k] / m["iteration_s"]))
    verdict = "tie" if abs(total) < 0.005 * m["iteration_s"] else ("wins" if total > 0 else "loses")
    text = "%s, decided by %s: %s of Megatron's iteration" % (verdict, key, ", ".join(parts) or "under 0.05%")
    if shape(s)[1:] != shape(m)[1:]:
        what = []
        if s["stages"] != m["stages"]:
            what.append("%d stages vs %d" % (s["stages"], m["stages"]))
        if s["micro_batch"] != m["micro_batch"]:
            what.append("micro-batch %d vs %d" % (s["micro_batch"], m["micro_batch"]))
        if s["recompute"] != m["recompute"]:
            what.append("recomputed" if s["recompute"] else "Megatron recomputes")
        if what:
            text += "; shape: " + ", ".join(what)
    for p, who in ((m, "Megatron"), (s, "primec")):
        if p["recompute"] or p["least_memory"]:
            text += "; %s at %.0f%% of the memory limit" % (who, 100 * p["memory"]["total"] / memory_limit)
    return text


def gb(x):
    return "%.1f GB" % (x / 1e9)


def unmet(stderr):
    """The smallest peak and its largest term from a memory-limit error."""
    m = re.search(r"smallest peak any plan reaches is (\d+) bytes .*dominated by ([a-z ]+) \(", stderr)
    if not m:
        raise RuntimeError("primec failed: " + stderr)
    return "no plan fits: least %s (%s)" % (gb(float(m.group(1))), m.group(2))


def training(args):
    print("| model | devices | primec plan (mesh x stages x replicas, micro-batch) | Megatron plan | "
          "throughput | collective time | collective bytes | peak memory | memory: primec / Megatron | "
          "Megatron's collective share | search ms (processor) | why: the deciding term (primec - Megatron, per term, % of Megatron's iteration) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratios = {name: [] for name, _, _ in TRAIN_SETS}
    with tempfile.TemporaryDirectory() as tmp:
        for title, example, model, plan, params, layers, vocab, batch in TRAIN_MODELS:
            path = os.path.join(tmp, model + "_" + title.replace(".", "_").replace("-", "_") + ".prime")
            run = "train_" + title.replace(".", "_").replace("-", "_").lower()
            with open(path, "w") as f:
                f.write('import "%s";\n' % os.path.abspath(example))
                if args.batched:
                    # The layer with a batch dimension (opt_b, ...): one
                    # sequence, the replica axis r of size 1.
                    f.write("shape %s_shape of %s_b { param layers = 1, b = 1, %s; }\n" % (run, model, params))
                    f.write("run %s = %s_dp(R = 1, P = 4) on %s_shape;\n" % (run, plan, run))
                    f.write("run %s_sp = %s_sp_dp(R = 1, P = 4) on %s_shape;\n" % (run, plan, run))
                else:
                    f.write("shape %s_shape of %s { param layers = 1, %s; }\n" % (run, model, params))
                    f.write("run %s = %s(P = 4) on %s_shape;\n" % (run, plan, run))
                    f.write("run %s_sp = %s_sp(P = 4) on %s_shape;\n" % (run, plan, run))
            for name, profile, n in TRAIN_SETS:
                # Megatron-LM's plans: tensor parallelism, and with sequence
                # parallelism; the faster of the two is the baseline.
                results = []
                for variant in (run, run + "_sp"):
                    times, last, err = [], None, None
                    for _ in range(args.repeat):
                        out = subprocess.run([args.primec, "plan", path, "--model", variant, "--training",
                                              "--layers", str(layers), "--global-batch", str(batch),
                                              "--vocab", str(vocab), "--devices", str(n), "--profile",
                                              profile, "--elem-bytes", args.elem_bytes, "--json"]
                                             + (["--shard-optimizer"] if args.shard_optimizer else [])
                                             + (["--uneven-stages"] if args.uneven_stages else []),
                                             capture_output=True, text=True)
                        if out.returncode != 0:
                            err = unmet(out.stderr)
                            break
                        last = json.loads(out.stdout)
                        times.append(last["search"]["search_ms"])
                    results.append((err, last, times))
                err, last, times = results[0]
                if err:
                    print("| %s | %s | %s | | | | | | | | | |" % (title, name, err))
                    continue
                s = last["search"]
                ms = statistics.median(times)
                cpu = last["search"]["search_cpu_ms"]
                pinned = []
                for k, (_, other, _) in enumerate(results):
                    p = other["pinned"] if other else None
                    if p and "error" not in p:
                        pinned.append((p["iteration_s"], k, p))
                if not pinned:
                    m = last["pinned"]
                    why = "no plan fits: least %s (%s)" % (gb(m["smallest_memory"]), m["dominant"]) if m else "none"
                    print("| %s | %s | %s | %s | | | | | %s / - | | %.0f (%.0f) | |" % (
                        title, name, plan_text(s), why, gb(s["memory"]["total"]), ms, cpu))
                    continue
                _, k, m = min(pinned, key=lambda x: (x[0], x[1]))
                thr = m["iteration_s"] / s["iteration_s"]
                ratios[name].append(thr)
                ct = s["collective_time_s"] / m["collective_time_s"] if m["collective_time_s"] else float("nan")
                cb = s["collective_bytes"] / m["collective_bytes"] if m["collective_bytes"] else float("nan")
                mem = s["memory"]["total"] / m["memory"]["total"]
                share = m["collective_time_s"] / m["iteration_s"]
                print("| %s | %s | %s | %s%s | %.2fx | %.2f | %.2f | %.2f | %s / %s | %.0f%% | %.0f (%.0f) | %s |" % (
                    title, name, plan_text(s), plan_text(m), ", SP" if k else "", thr, ct, cb, mem,
                    gb(s["memory"]["total"]), gb(m["memory"]["total"]), 100 * share, ms, cpu,
                    explain_row(s, m, MEMORY[profile])))
    print()
    for name, _, _ in TRAIN_SETS:
        r = ratios[name]
        if r:
            print("geomean %s: %.2fx" % (name, statistics.geometric_mean(r)))
        else:
            print("geomean %s: n/a (no model where both plans fit)" % name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--primec", default="build-rel/compiler/primec")
    ap.add_argument("--profile", default="v100")
    ap.add_argument("--elem-bytes", default="2")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--devices", default=None)
    ap.add_argument("--set", choices=["layers", "mlp", "training"], default="layers")
    ap.add_argument("--shard-optimizer", action="store_true",
                    help="--set training: optimizer state and step sharded over the replicas "
                         "(ZeRO-1), for both plans")
    ap.add_argument("--batched", action="store_true",
                    help="--set training: the layers with a batch dimension (opt_b, llama2_b, bloom_b)")
    ap.add_argument("--uneven-stages", action="store_true",
                    help="--set training: stage counts that do not divide the layers too")
    args = ap.parse_args()
    if args.repeat is None:
        args.repeat = 1 if args.set == "training" else 5
    if args.set == "training":
        training(args)
        return
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
