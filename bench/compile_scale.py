#!/usr/bin/env python3
"""compile_scale.py — how the compiler's work and its output grow with the
mesh and the layer count.

    python3 bench/compile_scale.py --primec build/compiler/primec \
        [--before OLD_PRIMEC] [--repeat 5] [--sizes 2,4,8,16] [--check-sizes 32,64]
    python3 bench/compile_scale.py --primec build/compiler/primec --set opt [--before OLD] \
        [--repeat 5] [--layers 1,96] [--meshes 'square, 4x4;...']
    python3 bench/compile_scale.py --primec build/compiler/primec --set ring [--before OLD] \
        [--sizes 128,256,512]

The default set: `primec build --emit-only` of a single square (Cannon)
matmul with m = k = n = 32 P on P x P meshes, and `check` on larger
meshes; median wall time, max RSS and emitted C size per mesh (and the
same for --before, side by side).

--set opt: OPT-175B (examples/opt_layer.prime, published shape) with 1
and 96 layers under the Megatron plan on 4 and 16 devices and the square
grid on 2x2, 4x4 and 8x8: `check` (time and max RSS), the compiler's own time to the emitted C
(`--dump-after=emit`, unformatted), `build --emit-only` (formatted with
clang-format), `build` (the C compiler too), and the emitted C's size.

--set ring: `check` of a ring matmul on one long axis of D devices
(m = n = D, k = 64; docs/program-form.md, "A ring on a long mesh"), for
each D of --sizes: median time and max RSS (and the same for --before).

With --set opt, --before measures the older compiler's `check` and own
time right after each case's, so that both see the same load; --layers
and --meshes choose the layer counts and the plans.

--own-only (with --set opt) measures `check` and the compiler's own time
only, without clang-format and the C compiler (the size column is then
the unformatted C's).

--cpu reports processor time (user + system) instead of wall time: on a
machine shared with other jobs, wall time mostly measures the others.

Use a Release build.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

MODEL = """model sq {{
    param m = {n}, k = {n}, n = {n};
    mesh(i: {p}, j: {p});
    input x[m, k];
    weight w[k, n];
    y = matmul(x, w) use square;
}}
"""

RING = """model big {{ param m = {d}, k = 64, n = {d}; mesh(d: {d}); input x[m, k]; weight w[k, n]; y = matmul(x, w) use ring; }}
"""


CPU_TIME = False  # --cpu: user + system seconds instead of wall seconds


def run_once(cmd):
    """(seconds, max RSS in KB) of one run, via /usr/bin/time: wall
    seconds, or user + system seconds under --cpu."""
    with tempfile.NamedTemporaryFile(mode="r", suffix=".time") as tf:
        full = ["/usr/bin/time", "-f", "%e %U %S %M", "-o", tf.name] + cmd
        r = subprocess.run(full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise RuntimeError("%s failed: %s" % (" ".join(cmd), r.stderr[-500:]))
        wall, user, system, rss = tf.read().split()[-4:]
        t = float(user) + float(system) if CPU_TIME else float(wall)
        return t, int(rss)


def measure(primec, work, p, mode, repeat, timeout):
    src = os.path.join(work, "%s%d.prime" % ("ring" if mode == "ring" else "sq", p))
    with open(src, "w") as f:
        f.write(RING.format(d=p) if mode == "ring" else MODEL.format(n=32 * p, p=p))
    out = os.path.join(work, "out%d" % p)
    if mode == "emit":
        cmd = [primec, "build", src, "--emit-only", "-o", out]
    else:
        cmd = [primec, "check", src]
    times, rsss = [], []
    for _ in range(repeat):
        wall, rss = run_once(["timeout", str(timeout)] + cmd)
        times.append(wall)
        rsss.append(rss)
    size = os.path.getsize(os.path.join(out, "sq.c")) if mode == "emit" else None
    return statistics.median(times), max(rsss), size


def timed(cmd, repeat, out=subprocess.DEVNULL):
    times, rss = [], 0
    for _ in range(repeat):
        wall, r = run_once(cmd)
        times.append(wall)
        rss = max(rss, r)
    return statistics.median(times), rss


def opt_set(a):
    example = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                           "opt_layer.prime")
    # The example's runs, with the layer count and the mesh size set by --param.
    cases = [("opt_megatron", "P=4", "Megatron, 4 devices"),
             ("opt_megatron", "P=16", "Megatron, 16 devices"),
             ("opt_square", "P=2", "square, 2x2"),
             ("opt_square", "P=4", "square, 4x4"),
             ("opt_square", "P=8", "square, 8x8")]
    layer_counts = [int(x) for x in a.layers.split(",") if x]
    head = ["plan", "layers", "check", "check: max RSS", "to C (own)", "max RSS", "emit-only",
            "build", "C size"]
    if a.before:
        head += ["before: check", "before: check max RSS", "before: to C (own)",
                     "before: max RSS"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    with tempfile.TemporaryDirectory() as work:
        for name, mesh, label in cases:
            if a.meshes and label not in a.meshes.split(";"):
                continue
            for layers in layer_counts:
                out = os.path.join(work, "out")
                p = a.primec
                sel = [example, "--model", name, "--param", "layers=%d" % layers, "--param", mesh]
                t_check, rss_check = timed([p, "check"] + sel, a.repeat)
                t_own, rss = timed([p, "build"] + sel + ["--dump-after=emit"], a.repeat)
                old = []
                if a.before:
                    # The older compiler right after, so that both see the same load.
                    tb_check, rssb_check = timed([a.before, "check"] + sel, a.repeat)
                    tb_own, rssb = timed([a.before, "build"] + sel + ["--dump-after=emit"],
                                         a.repeat)
                    old = ["%.2f s" % tb_check, "%.0f MB" % (rssb_check / 1024),
                           "%.2f s" % tb_own, "%.0f MB" % (rssb / 1024)]
                if a.own_only:
                    r = subprocess.run([p, "build"] + sel + ["--dump-after=emit"],
                                       stdout=subprocess.PIPE, check=True)
                    size = len(r.stdout)
                    t_emit = t_build = None
                else:
                    t_emit, _ = timed([p, "build"] + sel + ["--emit-only", "-o", out], a.repeat)
                    t_build, _ = timed([p, "build"] + sel + ["-o", out], a.repeat)
                    size = os.path.getsize(os.path.join(out, name + ".c"))
                row = [label, str(layers), "%.2f s" % t_check, "%.0f MB" % (rss_check / 1024)]
                row += ["%.2f s" % t_own,
                        "%.0f MB" % (rss / 1024),
                        "-" if t_emit is None else "%.2f s" % t_emit,
                        "-" if t_build is None else "%.2f s" % t_build,
                        "%.0f KB" % (size / 1024)] + old
                print("| " + " | ".join(row) + " |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=["matmul", "opt", "ring"], default="matmul")
    ap.add_argument("--primec", required=True)
    ap.add_argument("--before", help="an older primec, measured side by side")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sizes", default=None,
                    help="meshes: P of P x P (default 2,4,8,16), or D with --set ring "
                    "(default 128,256,512)")
    ap.add_argument("--check-sizes", default="32,64")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--own-only", action="store_true",
                    help="--set opt: check and the compiler's own time only")
    ap.add_argument("--layers", default="1,96",
                    help="--set opt: the layer counts (default 1,96)")
    ap.add_argument("--meshes", default=None,
                    help="--set opt: only these plans, by their labels separated by ';' "
                    "(e.g. 'square, 4x4;Megatron, 16 devices')")
    ap.add_argument("--cpu", action="store_true",
                    help="report user + system time instead of wall time")
    a = ap.parse_args()
    global CPU_TIME
    CPU_TIME = a.cpu
    if a.set == "opt":
        opt_set(a)
        return
    bins = [("now", a.primec)] + ([("before", a.before)] if a.before else [])
    rows = []
    if a.set == "ring":
        plan = (("ring", a.sizes or "128,256,512"),)
    else:
        plan = (("emit", a.sizes or "2,4,8,16"), ("check", a.check_sizes))
    with tempfile.TemporaryDirectory() as work:
        for mode, sizes in plan:
            for p in [int(x) for x in sizes.split(",") if x]:
                if mode == "ring":
                    row = ["check ring, %d devices" % p]
                else:
                    row = ["%s %dx%d" % ("build --emit-only" if mode == "emit" else "check", p, p)]
                for label, b in bins:
                    try:
                        t, rss, size = measure(b, work, p, mode, a.repeat, a.timeout)
                        row += ["%.2f s" % t, "%.0f MB" % (rss / 1024),
                                "%.0f KB" % (size / 1024) if size is not None else "-"]
                    except RuntimeError as e:
                        print(e, file=sys.stderr)
                        row += ["failed", "-", "-"]
                rows.append(row)
                print(" | ".join(row), file=sys.stderr)
    head = ["case"]
    for label, _ in bins:
        head += ["%s: time" % label, "%s: max RSS" % label, "%s: C" % label]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
