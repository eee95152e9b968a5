#!/usr/bin/env python3
"""megatron_published.py — the cost model held to published numbers.

Predicts the per-GPU training throughput of Megatron-LM's published GPT
configurations (Narayanan et al., SC 2021, "Efficient Large-Scale Language
Model Training on GPU Clusters Using Megatron-LM": GPT models of 1.7B to
1T parameters on up to 3072 A100 GPUs) with `primec cost` and prints it
beside the published teraFLOP/s per GPU.

    python3 bench/megatron_published.py [--primec build/compiler/primec]
                                        [--profile a100] [--json]

Every configuration is the one Megatron-LM's own script ran
(examples/sc21/run_table_1.sh in the Megatron-LM repository: tensor and
pipeline parallel sizes, micro- and global batch, layers, hidden size,
heads, layers per virtual pipeline stage, activation recomputation); the
published throughput is the README's table of the same runs
(images/cases_april2021.png). Sequence 2048, vocabulary 51,200, mixed
precision (2-byte elements), 8 GPUs per node.

The layer is the stdlib's GPT/OPT decoder layer (examples/opt_layer.prime:
model opt under plan megatron, Megatron-LM's partitions), at one sequence of 2048
tokens on the tensor-parallel mesh; `primec cost --layers ... --stages ...`
composes it into an iteration (compiler/cost_pipeline.h); its kernels are
priced as the kernels pass fuses them (compiler/cost_kernel.h; add
--no-fuse to the cost command to price each alone). Throughput uses
the paper's own FLOP count, F = 96 B s l h^2 (1 + s / 6h + V / 16 l h)
(recomputation included), divided by the predicted iteration time and the
GPU count, so predicted and published figures count the same FLOPs.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name, TP, PP, MBS, GBS, layers, hidden, heads, layers per virtual stage
# (0: no interleaving), GPUs, published teraFLOP/s per GPU.
CONFIGS = [
    ("1.7B", 1, 1, 16, 512, 24, 2304, 24, 0, 32, 137),
    ("3.6B", 2, 1, 16, 512, 30, 3072, 32, 0, 64, 138),
    ("7.5B", 4, 1, 16, 512, 36, 4096, 32, 0, 128, 142),
    ("18B", 8, 1, 8, 1024, 40, 6144, 48, 0, 256, 135),
    ("39B", 8, 2, 4, 1536, 48, 8192, 64, 0, 512, 138),
    ("76B", 8, 4, 2, 1792, 60, 10240, 80, 5, 1024, 140),
    ("145B", 8, 8, 2, 2304, 80, 12288, 96, 5, 1536, 148),
    ("310B", 8, 16, 1, 2160, 96, 16384, 128, 3, 1920, 155),
    ("530B", 8, 35, 1, 2520, 105, 20480, 128, 1, 2520, 163),
    ("1T", 8, 64, 1, 3072, 128, 25600, 160, 0, 3072, 163),
]
SEQ = 2048
VOCAB = 51200


def layer_run(name, tp, h, heads):
    """A shape of the example's `opt` model and a run of its Megatron-LM plan."""
    return ("shape %s_shape of opt { param layers = 1, s = %d, h = %d, a = %d, e = %d, f = %d; }\n"
            "run %s = megatron(P = %d) on %s_shape;\n"
            % (name, SEQ, h, heads, h // heads, 4 * h, name, tp, name))


def paper_flops(batch, layers, h):
    return 96.0 * batch * SEQ * layers * h * h * (
        1 + SEQ / (6.0 * h) + VOCAB / (16.0 * layers * h))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--primec", default=os.path.join(ROOT, "build/compiler/primec"))
    ap.add_argument("--profile", default="a100")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON too")
    args = ap.parse_args()
    example = os.path.join(ROOT, "examples/opt_layer.prime")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "gpt.prime")
        with open(path, "w") as f:
            f.write('import "%s";\n' % example)
            for c in CONFIGS:
                f.write(layer_run("gpt_" + c[0].replace(".", "_"), c[1], c[6], c[7]))
        for (name, tp, pp, mbs, gbs, layers, h, heads, lpvs, gpus, published) in CONFIGS:
            dp = gpus // (tp * pp)
            chunks = (layers // pp) // lpvs if lpvs else 1
            cmd = [args.primec, "cost", path, "--model", "gpt_" + name.replace(".", "_"),
                   "--profile", args.profile, "--elem-bytes", "2", "--devices-per-node", "8",
                   "--layers", str(layers), "--stages", str(pp), "--chunks", str(chunks),
                   "--replicas", str(dp), "--micro-batch", str(mbs), "--global-batch", str(gbs),
                   "--vocab", str(VOCAB), "--recompute", "--json"]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit("%s\n%s" % (" ".join(cmd), out.stderr))
            pc = json.loads(out.stdout)["pipeline"]
            it_s = pc["iteration_us"] / 1e6
            pred = paper_flops(gbs, layers, h) / (it_s * gpus) / 1e12
            rows.append({
                "model": name, "tp": tp, "pp": pp, "dp": dp, "chunks": chunks,
                "micro_batch": mbs, "global_batch": gbs, "gpus": gpus,
                "iteration_s": it_s, "pipeline_s": pc["pipeline_us"] / 1e6,
                "bubble_s": pc["bubble_us"] / 1e6, "allreduce_s": pc["allreduce_us"] / 1e6,
                "predicted_tflops": pred, "published_tflops": published,
                "ratio": pred / published,
            })
    print("| model | TP | PP | DP | chunks | MBS | GBS | GPUs | iteration (s) | bubble (s) "
          "| DP all-reduce (s) | predicted TFLOP/s | published | predicted / published |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %d | %d | %d | %d | %d | %d | %d | %.2f | %.2f | %.2f | %.1f | %d | %.2f |"
              % (r["model"], r["tp"], r["pp"], r["dp"], r["chunks"], r["micro_batch"],
                 r["global_batch"], r["gpus"], r["iteration_s"], r["bubble_s"],
                 r["allreduce_s"], r["predicted_tflops"], r["published_tflops"], r["ratio"]))
    within = sum(1 for r in rows if abs(r["ratio"] - 1) <= 0.15)
    geo = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
    print("\nwithin 15%%: %d of %d; geometric mean predicted / published: %.2f"
          % (within, len(rows), geo))
    if args.json:
        print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
