#!/usr/bin/env python3
"""blas_core.py PRIMEC MODEL.prime MODEL DIR: the BLAS kernels a built program
runs (runtime/kernels.c, prime_blas_choose_core).

Builds the model and runs it with --repeat 1 --json three ways:

- as it is: on a processor with AVX2 and FMA (from /proc/cpuinfo) the
  program must run kernels for AVX2 or newer, whatever OpenBLAS chose
  from the processor's model number when it loaded;
- with OPENBLAS_CORETYPE=Prescott: the user's choice stands (the program
  reports Prescott, it does not execute itself again with another one);
- the JSON's timing.blas_core and the report's "BLAS kernels:" agree.
"""
import json
import os
import subprocess
import sys

AVX2_CORES = {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"}


def run(prog, env, json_path):
    out = subprocess.run([prog, "--repeat", "1", "--json", json_path], env=env,
                         capture_output=True, text=True)
    if out.returncode:
        sys.exit("FAIL: %s exited %d: %s" % (prog, out.returncode, out.stderr))
    line = [l for l in out.stdout.splitlines() if "BLAS kernels:" in l]
    if len(line) != 1:
        sys.exit("FAIL: no 'BLAS kernels:' in the report:\n" + out.stdout)
    said = line[0].split("BLAS kernels:", 1)[1].strip()
    core = json.load(open(json_path))["timing"]["blas_core"]
    if said != core:
        sys.exit("FAIL: the report says %s, the JSON %s" % (said, core))
    return core


def main():
    primec, model_file, model, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    subprocess.run([primec, "build", model_file, "--model", model, "-o", work], check=True,
                   capture_output=True)
    prog = os.path.join(work, model)
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    flags = set()
    with open("/proc/cpuinfo") as f:
        for l in f:
            if l.startswith("flags"):
                flags = set(l.split(":", 1)[1].split())
                break
    core = run(prog, env, os.path.join(work, "auto.json"))
    print("processor: avx2 %s fma %s avx512f %s; kernels: %s" %
          ("avx2" in flags, "fma" in flags, "avx512f" in flags, core))
    if "avx2" in flags and "fma" in flags and core.lower() not in AVX2_CORES:
        sys.exit("FAIL: an AVX2 processor runs %s kernels" % core)
    forced = run(prog, dict(env, OPENBLAS_CORETYPE="Prescott"), os.path.join(work, "forced.json"))
    if forced.lower() != "prescott":
        sys.exit("FAIL: OPENBLAS_CORETYPE=Prescott ran %s kernels" % forced)
    print("PASS")


main()
