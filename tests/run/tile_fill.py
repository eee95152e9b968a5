#!/usr/bin/env python3
"""tile_fill.py PRIMEC MODEL.prime NAME DIR

New tiles whose first writer overwrites them are not filled
(runtime/prime_rt.h, PrimeTileFill; docs/kernels.md), checked on a real
program whose kernels are all GEMMs (a square matmul: its output and
gradients accumulate in place over the steps):

  - the emitted C: every tile kernel kernelN has its overwriting form
    kernelN_set, and where kernelN's GEMM adds to its tile (beta 1),
    kernelN_set's sets it (beta 0), so it never reads it;
  - PRIME_TILE_FILL=nan (every tile allocated unfilled holds NaNs):
    --check passes against the dense fp64 reference, and --json counts
    no filled tile and some unfilled ones (each step's first GEMM writes
    its tile with beta 0, the later ones add to it);
  - PRIME_TILE_FILL=lazy (the release default): the same counts;
  - PRIME_TILE_FILL=eager (every tile filled at its allocation): --check
    passes with no unfilled tile, and the same byte counters.

Prints PASS or FAIL with the reason last.
"""
import json
import os
import re
import subprocess
import sys


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


def bodies(c_text):
    """name -> body of each static tile kernel function."""
    out = {}
    for m in re.finditer(r"^static void (kernel\d+(?:_set)?)\([^)]*\)\s*\{\n(.*?)^\}", c_text,
                         re.S | re.M):
        out[m.group(1)] = m.group(2)
    return out


def run(exe, mode, js):
    env = dict(os.environ, PRIME_TILE_FILL=mode)
    got = subprocess.run([exe, "--check", "--json", js], capture_output=True, text=True, env=env)
    if got.returncode != 0 or "check passed" not in got.stdout:
        fail(f"{mode}: --check did not pass (exit {got.returncode})\n{got.stdout}{got.stderr}")
    with open(js) as fh:
        data = json.load(fh)
    t = data["timing"]
    print(f"{mode}: check passed, tiles filled {t['tiles_filled']}, unfilled "
          f"{t['tiles_unfilled']}")
    return t, data["ranks"]


def main():
    primec, model_file, name, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    subprocess.run([primec, "build", model_file, "-o", work], check=True, capture_output=True)
    exe = os.path.join(work, name)
    with open(exe + ".c") as fh:
        fns = bodies(fh.read())
    kernels = [k for k in fns if not k.endswith("_set")]
    if not kernels:
        fail("no tile kernels in the emitted C")
    for k in kernels:
        if k + "_set" not in fns:
            fail(f"{k} has no overwriting form")
        acc = re.findall(r"prime_gemm\w*\(.*?, ([01])\.0f, out", fns[k], re.S)
        sets = re.findall(r"prime_gemm\w*\(.*?, ([01])\.0f, out", fns[k + "_set"], re.S)
        if not acc or acc != ["1"] * len(acc):
            fail(f"{k}: its GEMMs should add to the tile (beta 1): {acc}")
        if not sets or sets[0] != "0" or sets[1:] != ["1"] * (len(sets) - 1):
            fail(f"{k}_set: its first GEMM should set the tile (beta 0): {sets}")
    print(f"{len(kernels)} tile kernels, each with an overwriting form whose first GEMM has "
          "beta 0")
    js = os.path.join(work, "fill.json")
    nan, nan_ranks = run(exe, "nan", js)
    if nan["tiles_filled"] != 0 or nan["tiles_unfilled"] <= 0:
        fail("nan: every tile's first writer should overwrite it")
    lazy, _ = run(exe, "lazy", js)
    if (lazy["tiles_filled"], lazy["tiles_unfilled"]) != (nan["tiles_filled"],
                                                          nan["tiles_unfilled"]):
        fail("lazy and nan count different fills")
    eager, eager_ranks = run(exe, "eager", js)
    if eager["tiles_unfilled"] != 0 or eager["tiles_filled"] < nan["tiles_unfilled"]:
        fail("eager: every tile should be filled at its allocation")
    if eager_ranks != nan_ranks:
        fail("the byte counters differ between eager and nan")
    print("PASS")


if __name__ == "__main__":
    main()
