#!/usr/bin/env python3
"""Where a program's kernel time goes, phase by phase.

Reads the --trace of a program built by primec (its last iteration) and
the --dump-after=kernels of its model, and prints, per phase ("forward
ex_0", "gradient hd_1 -> dc1_1"), the kernel time summed over the devices, its share of all kernel
time, and whether its kernel has a GEMM node. The phases of one operator
over the layers (ex_0, ex_1) are also summed by operator family (ex).

    python3 bench/step_xla.py --no-xla --runs 1 --shapes 512,512,8,64,2048
    python3 bench/kernel_breakdown.py --primec build/compiler/primec \\
        build/bench-xla/512x512x8x64x2048 opt_small_megatron

The trace and the model file are those bench/step_xla.py leaves in its
work folder (PROGRAM.trace.json, model.prime); --run runs the program
again first (--repeat 3).
"""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from step_xla import gemm_phases, warn_ambiguous  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--primec", default=os.path.join(HERE, "..", "build", "compiler", "primec"))
    ap.add_argument("--run", action="store_true", help="run the program again first")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("folder")
    ap.add_argument("model")
    args = ap.parse_args()
    exe = os.path.join(args.folder, args.model)
    trace = exe + ".trace.json"
    if args.run:
        subprocess.run([exe, "--repeat", "3", "--trace", trace], check=True,
                       stdout=subprocess.DEVNULL)
    gemm = gemm_phases(args.primec, os.path.join(args.folder, "model.prime"), args.model) or set()
    with open(trace) as fh:
        data = json.load(fh)
    ev = data["traceEvents"] if isinstance(data, dict) else data
    per, fam, cpu = {}, {}, {}
    total = 0
    for x in ev:
        if x.get("ph", "X") != "X" or x["name"].split(" ")[0] not in (
                "forward", "backward", "gradient"):
            continue
        name = x["name"]
        per[name] = per.get(name, 0) + x["dur"]
        # "backward pr_1 -> dex_1" is of family "backward pr -> dex"
        family = re.sub(r"_[0-9]+( |$)", r"\1", name)
        key = family + (" (gemm)" if name in gemm else "")
        fam[key] = fam.get(key, 0) + x["dur"]
        cpu[key] = cpu.get(key, 0) + x.get("args", {}).get("cpu_us", float("nan"))
        total += x["dur"]
    warn_ambiguous(per)
    g = sum(v for k, v in per.items() if k in gemm)
    ctotal = sum(cpu.values())
    cg = sum(v for k, v in cpu.items() if k.endswith(" (gemm)"))
    print(f"kernel time {total / 1e3:.1f} ms over all devices; GEMM phases {g / total:.1%},"
          f" the rest {1 - g / total:.1%}")
    print(f"kernel processor time {ctotal / 1e3:.1f} ms; GEMM phases {cg / ctotal:.1%},"
          f" the rest {1 - cg / ctotal:.1%}")
    print("by operator (all layers): span, its share; processor time, its share")
    for k, v in sorted(fam.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"  {v / 1e3:9.2f} ms {v / total:6.1%} {cpu[k] / 1e3:9.2f} ms"
              f" {cpu[k] / ctotal:6.1%}  {k}")


if __name__ == "__main__":
    main()
