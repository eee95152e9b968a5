#!/usr/bin/env python3
"""Tests of --weights, --weights-map and --save-grads (docs/weights.md).

usage: weights_test.py PRIMEC SOURCE_DIR WORK_DIR CASE [MPIEXEC FLAGS...]

CASE is one of
  matmul  examples/matmul_square.prime: w (F32, F16, BF16), x and dy
          loaded; --check passes, and the saved gradients equal
          dw = x^T dy and dx = dy w^T computed here in fp64 from the
          values written (so the loaded numbers are the ones used)
  mpi     the matmul case built with --target mpi and run as 4 processes
          under MPIEXEC FLAGS... -n 4: the gradients gathered across the
          processes equal the ones computed here
  map     the same through a --weights-map with HF-style names; an extra
          tensor is a warning
  opt     examples/opt_layer.prime, opt_small_megatron: every weight from
          --list-weights written in BF16, --check passes, the gradients
          file holds every weight's gradient, and other weights give other
          gradients
  bad     bad files and maps: exit code 2 and the message
  fuzz    every truncation of a small file and seeded byte flips of its
          header: exit code 0 or 2, never a crash
  random  without --check no process holds a whole input: each device
          makes its own tiles from the seed; the gradients saved without
          --check are the same bytes as with it (matmul_square and
          opt_small_square and _megatron, both --init kinds, two seeds);
          the mpi case checks the same across 4 processes

The safetensors files are written here with struct and json only.
"""

import json
import math
import os
import random
import re
import shutil
import struct
import subprocess
import sys

DTYPE_SIZE = {"F32": 4, "F16": 2, "BF16": 2}


def encode(dtype, vals):
    """The little-endian bytes of vals in dtype, and the values they hold."""
    if dtype == "F32":
        raw = struct.pack("<%df" % len(vals), *vals)
        return raw, list(struct.unpack("<%df" % len(vals), raw))
    if dtype == "F16":
        raw = struct.pack("<%de" % len(vals), *vals)
        return raw, list(struct.unpack("<%de" % len(vals), raw))
    # BF16: the top half of the fp32 bits (truncated).
    bits = struct.unpack("<%dI" % len(vals), struct.pack("<%df" % len(vals), *vals))
    top = [b >> 16 for b in bits]
    raw = struct.pack("<%dH" % len(top), *top)
    back = struct.unpack("<%df" % len(top), struct.pack("<%dI" % len(top), *[t << 16 for t in top]))
    return raw, list(back)


def safetensors_bytes(tensors, metadata=None):
    """tensors: list of (name, dtype, shape, vals). Returns (bytes, held
    values per name)."""
    header, data, held = {}, b"", {}
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, vals in tensors:
        raw, back = encode(dtype, vals)
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
        held[name] = back
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data, held


def read_safetensors(path):
    """name -> (shape, values) of an F32 file."""
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", e
        b, end = e["data_offsets"]
        count = end - b
        assert count == 4 * math.prod(e["shape"]), (name, e)
        vals = struct.unpack("<%df" % (count // 4), blob[8 + n + b:8 + n + end])
        out[name] = (e["shape"], list(vals))
    return out


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def build(primec, src, model, out, *extra):
    subprocess.run([primec, "build", src, "--model", model, "-o", out, *extra], check=True,
                   stdout=subprocess.DEVNULL)
    return os.path.join(out, model)


LAUNCH = []  # the MPI launcher, for the mpi case


def run(prog, *args):
    return subprocess.run([*LAUNCH, prog, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def rand(rng, n, scale=1.0):
    return [rng.uniform(-scale, scale) for _ in range(n)]


def close(got, want, what):
    scale = max(1e-30, max(abs(v) for v in want))
    err = max(abs(a - b) for a, b in zip(got, want)) / scale
    if len(got) != len(want) or not err < 1e-5:
        fail("%s: relative error %.3e" % (what, err))
    print("%s: relative error %.3e ok" % (what, err))


M, K, N = 96, 64, 80


def matmul_grads(x, w, dy):
    """dw = x^T dy [K, N] and dx = dy w^T [M, K], row-major, in fp64."""
    dw = [0.0] * (K * N)
    for i in range(M):
        xi, di = x[i * K:(i + 1) * K], dy[i * N:(i + 1) * N]
        for a in range(K):
            xa = xi[a]
            row = a * N
            for b in range(N):
                dw[row + b] += xa * di[b]
    dx = [0.0] * (M * K)
    for i in range(M):
        di = dy[i * N:(i + 1) * N]
        for a in range(K):
            wa = w[a * N:(a + 1) * N]
            dx[i * K + a] = sum(p * q for p, q in zip(di, wa))
    return dw, dx


def check_matmul(prog, work, dtype, names, map_file=None, extra=False, x_dtype="F32", x_scale=1.0,
                 tiles=False):
    """With tiles, no --check: the driver holds no whole weights and each
    device reads its own tiles from the files; the saved gradients are
    held to the test's own all the same."""
    rng = random.Random(7)
    x, w, dy = rand(rng, M * K, x_scale), rand(rng, K * N, 0.2), rand(rng, M * N)
    tensors = [(names["w"], dtype, [K, N], w), (names["x"], x_dtype, [M, K], x)]
    if extra:
        tensors.append(("lm_head.bias", "F32", [3], [1.0, 2.0, 3.0]))
    wdir, gdir = fresh(os.path.join(work, "w")), fresh(os.path.join(work, "g"))
    blob, held = safetensors_bytes(tensors, {"format": "pt"})
    open(os.path.join(wdir, "model-00001-of-00002.safetensors"), "wb").write(blob)
    # A second file: sharded checkpoints are read as one.
    blob2, held2 = safetensors_bytes([(names["dy"], "BF16", [M, N], dy)])
    open(os.path.join(wdir, "model-00002-of-00002.safetensors"), "wb").write(blob2)
    held.update(held2)
    args = ["--weights", wdir, "--save-grads", gdir] + ([] if tiles else ["--check"])
    if map_file:
        args += ["--weights-map", map_file]
    r = run(prog, *args)
    if r.returncode != 0 or ("check passed" not in r.stdout) != tiles:
        fail("%s: rc %d\n%s\n%s" % (dtype, r.returncode, r.stdout, r.stderr))
    dtype += " (tiles read by each device)" if tiles else ""
    if extra and "warning: 'lm_head.bias' in the weights is no weight or input" not in r.stderr:
        fail("no warning for the extra tensor: " + r.stderr)
    grads = read_safetensors(os.path.join(gdir, "grads.safetensors"))
    if sorted(grads) != sorted([names["w"], names["x"]]):
        fail("gradient names %s" % sorted(grads))
    dw, dx = matmul_grads(held[names["x"]], held[names["w"]], held[names["dy"]])
    if grads[names["w"]][0] != [K, N] or grads[names["x"]][0] != [M, K]:
        fail("gradient shapes")
    close(grads[names["w"]][1], dw, "%s dw" % dtype)
    close(grads[names["x"]][1], dx, "%s dx" % dtype)


def same_without_check(prog, work, *extra):
    """The gradients of a run without --check (tiles made by the devices)
    are byte for byte those of a run with it (tiles cut from the whole
    inputs), and differ for another seed."""
    saved = {}
    for mode, seed in (("check", "1"), ("tiles", "1"), ("tiles", "2")):
        gdir = fresh(os.path.join(work, "grads-%s-%s" % (mode, seed)))
        args = ["--seed", seed, "--save-grads", gdir, *extra] + (["--check"] if mode == "check" else [])
        r = run(prog, *args)
        if r.returncode != 0 or ("check passed" in r.stdout) != (mode == "check"):
            fail("%s %s: exit %d\n%s%s" % (prog, " ".join(args), r.returncode, r.stdout, r.stderr))
        names = sorted(os.listdir(gdir))
        if not names:
            fail("%s: no gradients saved" % prog)
        saved[(mode, seed)] = b"".join(open(os.path.join(gdir, n), "rb").read() for n in names)
    if saved[("check", "1")] != saved[("tiles", "1")]:
        fail("%s %s: the gradients without --check differ from those with it" % (prog, " ".join(extra)))
    if saved[("tiles", "1")] == saved[("tiles", "2")]:
        fail("%s: seeds 1 and 2 gave the same gradients" % prog)
    print("%s %s: %d gradient bytes equal with and without --check" %
          (os.path.basename(prog), " ".join(extra), len(saved[("check", "1")])))


def case_random(primec, src, work):
    for path, model in (("matmul_square.prime", "matmul_square"), ("opt_layer.prime", "opt_small_square"),
                        ("opt_layer.prime", "opt_small_megatron")):
        prog = build(primec, os.path.join(src, "examples", path), model, fresh(os.path.join(work, model)))
        for init in ("fan-in", "uniform"):
            same_without_check(prog, work, "--init", init)


def case_matmul(primec, src, work):
    prog = build(primec, os.path.join(src, "examples/matmul_square.prime"), "matmul_square",
                 os.path.join(work, "bin"))
    for dtype in ("F32", "F16", "BF16"):
        check_matmul(prog, work, dtype, {"w": "w", "x": "x", "dy": "dy"})
        check_matmul(prog, work, dtype, {"w": "w", "x": "x", "dy": "dy"}, tiles=True)
    # x all F16 subnormals (below 2^-14): dw = x^T dy shows their conversion.
    check_matmul(prog, work, "F16", {"w": "w", "x": "x", "dy": "dy"}, x_dtype="F16",
                 x_scale=6e-5)


def case_mpi(primec, src, work):
    prog = build(primec, os.path.join(src, "examples/matmul_square.prime"), "matmul_square",
                 os.path.join(work, "bin"), "--target", "mpi")
    check_matmul(prog, work, "BF16", {"w": "w", "x": "x", "dy": "dy"})
    check_matmul(prog, work, "BF16", {"w": "w", "x": "x", "dy": "dy"}, tiles=True)
    same_without_check(prog, work, "--init", "fan-in")


def case_map(primec, src, work):
    prog = build(primec, os.path.join(src, "examples/matmul_square.prime"), "matmul_square",
                 os.path.join(work, "bin"))
    names = {"w": "model.layers.0.proj.weight", "x": "inputs.embeds", "dy": "inputs.grad"}
    map_file = os.path.join(work, "names.map")
    with open(map_file, "w") as f:
        f.write("# prime name, safetensors name\n\n")
        for k, v in names.items():
            f.write("%s %s\n" % (k, v))
    check_matmul(prog, work, "BF16", names, map_file, extra=True)


def case_opt(primec, src, work):
    prog = build(primec, os.path.join(src, "examples/opt_layer.prime"), "opt_small_megatron",
                 os.path.join(work, "bin"))
    r = run(prog, "--list-weights")
    if r.returncode != 0:
        fail(r.stderr)
    entries = []
    for line in r.stdout.splitlines():
        kind, own, name, shape = line.split(" ", 3)
        entries.append((kind, own, name, json.loads(shape)))
    weights = [e for e in entries if e[0] == "weight"]
    if len(weights) < 10 or any(len(e[3]) < 1 for e in weights):
        fail("weights listed: %s" % r.stdout)
    results = []
    for seed in (1, 2):
        rng = random.Random(seed)
        tensors = [(name, "BF16", shape, rand(rng, math.prod(shape), 1 / math.sqrt(shape[0])))
                   for _, _, name, shape in weights]
        wdir, gdir = fresh(os.path.join(work, "w")), fresh(os.path.join(work, "g"))
        open(os.path.join(wdir, "model.safetensors"), "wb").write(safetensors_bytes(tensors)[0])
        r = run(prog, "--weights", wdir, "--check", "--save-grads", gdir)
        if r.returncode != 0 or "check passed" not in r.stdout:
            fail("opt seed %d: rc %d\n%s\n%s" % (seed, r.returncode, r.stdout[-2000:], r.stderr))
        grads = read_safetensors(os.path.join(gdir, "grads.safetensors"))
        for _, _, name, shape in weights:
            if name not in grads or grads[name][0] != shape:
                fail("gradient of %s missing or misshapen" % name)
            if not all(math.isfinite(v) for v in grads[name][1]):
                fail("gradient of %s not finite" % name)
        results.append(grads)
    # Other weights, other gradients: the loaded values are the ones used.
    differ = sum(results[0][n][1] != results[1][n][1] for _, _, n, _ in weights)
    if differ < len(weights) // 2:
        fail("only %d of %d gradients depend on the weights" % (differ, len(weights)))
    print("opt_small_megatron: %d weights loaded, %d gradients saved, check passed"
          % (len(weights), len(results[0])))


def transpose(vals, rows, cols):
    """The [cols, rows] transpose of a row-major [rows, cols] list."""
    return [vals[i * cols + j] for j in range(cols) for i in range(rows)]


def case_names(primec, src, work):
    """A model states its safetensors names (`from "NAME"`, `{layer}`,
    `transposed`): the run on a file with those names and transposed
    weights computes what the same model without names computes on the
    plain values, and saves the gradients under the file's names,
    transposed back."""
    named_src = os.path.join(src, "tests/weights/named.prime")
    plain_src = os.path.join(work, "plain.prime")
    text = open(named_src).read()
    plain = re.sub(r' from "[^"]*"( transposed)?', "", text)
    if plain == text or "from" in plain.replace("// ", ""):
        fail("could not strip the names of %s" % named_src)
    open(plain_src, "w").write(plain)
    named = build(primec, named_src, "mlp", os.path.join(work, "named"))
    plain_prog = build(primec, plain_src, "mlp", os.path.join(work, "plain"))
    r = run(named, "--list-weights")
    want = ["input x inputs.x [16, 8]",
            "weight w1_0 layers.0.fc1.weight [8, 12] transposed [12, 8] in the file",
            "weight w2_0 layers.0.fc2.weight [12, 8] transposed [8, 12] in the file",
            "weight w1_1 layers.1.fc1.weight [8, 12] transposed [12, 8] in the file",
            "weight w2_1 layers.1.fc2.weight [12, 8] transposed [8, 12] in the file"]
    if r.returncode != 0 or any(w not in r.stdout.splitlines() for w in want):
        fail("--list-weights of the named model:\n%s%s" % (r.stdout, r.stderr))
    rng = random.Random(7)
    S, H, F = 16, 8, 12
    vals = {"x": rand(rng, S * H), "dy": rand(rng, S * H)}
    for l in range(2):
        vals["w1_%d" % l] = rand(rng, H * F, 1 / math.sqrt(H))
        vals["w2_%d" % l] = rand(rng, F * H, 1 / math.sqrt(F))
    shapes = {"x": [S, H], "dy": [S, H], "w1_0": [H, F], "w1_1": [H, F], "w2_0": [F, H],
              "w2_1": [F, H]}
    file_name = {"x": "inputs.x", "dy": "dy"}
    for l in range(2):
        file_name["w1_%d" % l] = "layers.%d.fc1.weight" % l
        file_name["w2_%d" % l] = "layers.%d.fc2.weight" % l
    named_tensors, plain_tensors = [], []
    for own, v in vals.items():
        rows, cols = shapes[own]
        plain_tensors.append((own, "F32", [rows, cols], v))
        if own.startswith("w"):
            named_tensors.append((file_name[own], "F32", [cols, rows], transpose(v, rows, cols)))
        else:
            named_tensors.append((file_name[own], "F32", [rows, cols], v))
    grads = {}
    for label, prog, tensors in (("named", named, named_tensors), ("plain", plain_prog,
                                                                     plain_tensors)):
        wdir = fresh(os.path.join(work, label + "-w"))
        gdir = fresh(os.path.join(work, label + "-g"))
        open(os.path.join(wdir, "model.safetensors"), "wb").write(safetensors_bytes(tensors)[0])
        r = run(prog, "--weights", wdir, "--check", "--save-grads", gdir)
        if r.returncode != 0 or "check passed" not in r.stdout:
            fail("%s: rc %d\n%s\n%s" % (label, r.returncode, r.stdout[-2000:], r.stderr))
        grads[label] = read_safetensors(os.path.join(gdir, "grads.safetensors"))
    # Without --check each device reads its own tiles, transposed ones
    # included: the same gradients, bit for bit.
    wdir = os.path.join(work, "named-w")
    gdir = fresh(os.path.join(work, "tiles-g"))
    r = run(named, "--weights", wdir, "--save-grads", gdir)
    if r.returncode != 0:
        fail("named, tiles: rc %d\n%s\n%s" % (r.returncode, r.stdout[-2000:], r.stderr))
    tiles = read_safetensors(os.path.join(gdir, "grads.safetensors"))
    if tiles != grads["named"]:
        fail("gradients from tiles read by each device differ from the whole load's")
    print("tiles read by each device: the same %d gradients" % len(tiles))
    for own in ("x", "w1_0", "w2_0", "w1_1", "w2_1"):
        rows, cols = shapes[own]
        shape, g = grads["named"].get(file_name[own], (None, None))
        if g is None:
            fail("no gradient saved under %s: %s" % (file_name[own], sorted(grads["named"])))
        if own.startswith("w"):
            if shape != [cols, rows]:
                fail("gradient %s has shape %s, not the file's [%d, %d]"
                     % (file_name[own], shape, cols, rows))
            g = transpose(g, cols, rows)
        if grads["plain"][own][1] != g:
            fail("gradient of %s under %s differs from the unnamed model's" % (own, file_name[own]))
        print("gradient %s (%s): equal to the unnamed model's" % (file_name[own], own))
    # A weight stored untransposed where the model says `transposed`.
    bad = [(n, d, shape[::-1], v) if n == "layers.1.fc2.weight" else (n, d, shape, v)
           for n, d, shape, v in named_tensors]
    wdir = fresh(os.path.join(work, "bad-w"))
    open(os.path.join(wdir, "model.safetensors"), "wb").write(safetensors_bytes(bad)[0])
    r = run(named, "--weights", wdir)
    msg = ("weight 'layers.1.fc2.weight' has shape [12, 8] (F32) in the file; w2_1 needs [8, 12] "
           "(its transpose: `from ... transposed`)")
    if r.returncode != 2 or msg not in r.stderr:
        fail("untransposed weight: rc %d\n%s" % (r.returncode, r.stderr))
    print("untransposed weight refused: %s" % msg)


def expect_bad(prog, wdir, blob, want, *extra):
    for f in os.listdir(wdir):
        os.remove(os.path.join(wdir, f))
    open(os.path.join(wdir, "model.safetensors"), "wb").write(blob)
    r = run(prog, "--weights", wdir, *extra)
    if r.returncode != 2 or want not in r.stderr:
        fail("want exit 2 and %r, got %d:\n%s" % (want, r.returncode, r.stderr))
    print("exit 2: %s" % r.stderr.strip().splitlines()[0])


def header_blob(header, data=b""):
    text = json.dumps(header).encode() if isinstance(header, dict) else header
    return struct.pack("<Q", len(text)) + text + data


def case_bad(primec, src, work):
    prog = build(primec, os.path.join(src, "examples/matmul_square.prime"), "matmul_square",
                 os.path.join(work, "bin"))
    wdir = fresh(os.path.join(work, "w"))
    rng = random.Random(3)
    good, _ = safetensors_bytes([("w", "F32", [K, N], rand(rng, K * N))])
    w_entry = {"dtype": "F32", "shape": [K, N], "data_offsets": [0, 4 * K * N]}
    data = bytes(4 * K * N)
    expect_bad(prog, wdir, good[:5], "truncated: 5 bytes")
    expect_bad(prog, wdir, good[:len(good) - 1], "outside the data")
    expect_bad(prog, wdir, struct.pack("<Q", 1 << 20) + b"{}", "truncated: header length")
    expect_bad(prog, wdir, header_blob(b"{\"w\": [1,"), "bad JSON header")
    expect_bad(prog, wdir, header_blob(b"[1, 2]"), "the JSON header is not an object")
    expect_bad(prog, wdir, header_blob(b"{\"w\": {}, \"w\": {}}"), "bad JSON header")
    expect_bad(prog, wdir, header_blob({"w": dict(w_entry, dtype="F64")}, data),
               "dtype 'F64' is not F32, F16 or BF16")
    expect_bad(prog, wdir, header_blob({"w": dict(w_entry, shape=[N, K])}, data),
               "weight 'w' has shape [80, 64] (F32) in the file; w needs [64, 80]")
    expect_bad(prog, wdir, header_blob({"w": dict(w_entry, data_offsets=[8, 8 + 4 * K * N])},
                                       data), "outside the data")
    expect_bad(prog, wdir, header_blob({"w": dict(w_entry, data_offsets=[-4, 4 * K * N])}, data),
               "outside the data")
    expect_bad(prog, wdir, header_blob({"w": dict(w_entry, shape=[K, -N])}, data),
               "shape[1] is not a size")
    expect_bad(prog, wdir, header_blob({"w": {"dtype": "F32"}}), "needs \"dtype\", \"shape\"")
    expect_bad(prog, wdir, header_blob({"v": w_entry}, data), "weight 'w' is missing")
    map_file = os.path.join(work, "bad.map")
    open(map_file, "w").write("w model.w\nq other\n")
    expect_bad(prog, wdir, good, "bad.map:2:1: error: 'q' is no weight or input", "--weights-map",
               map_file)
    os.remove(os.path.join(wdir, "model.safetensors"))
    r = run(prog, "--weights", wdir)
    if r.returncode != 2 or "no .safetensors file in" not in r.stderr:
        fail("empty directory: %d %s" % (r.returncode, r.stderr))
    r = run(prog, "--save-grads", os.path.join(work, "no-such-dir"))
    if r.returncode != 2 or "--save-grads needs a writable directory" not in r.stderr:
        fail("bad --save-grads: %d %s" % (r.returncode, r.stderr))


def case_fuzz(primec, src, work):
    """Corruptions of a small file through the program: 0 or 2, no crash."""
    prog = build(primec, os.path.join(src, "examples/matmul_square.prime"), "matmul_square",
                 os.path.join(work, "bin"))
    wdir = fresh(os.path.join(work, "w"))
    rng = random.Random(11)
    good, _ = safetensors_bytes([("w", "BF16", [K, N], rand(rng, K * N)),
                                 ("x", "F16", [M, K], rand(rng, M * K))],
                               {"note": "a metadata string flips may land in"})
    (hlen,) = struct.unpack("<Q", good[:8])
    cases = [good]
    cases += [good[:n] for n in range(0, 8 + hlen + 1)]  # every truncation of the header
    cases += [good[:n] for n in range(8 + hlen, len(good), 997)]  # and some of the data
    for _ in range(150):  # seeded flips and overwrites inside the header
        b = bytearray(good)
        for _ in range(rng.randint(1, 3)):
            b[rng.randrange(8 + hlen)] = rng.randrange(256)
        cases.append(bytes(b))
    counts = {0: 0, 2: 0}
    path = os.path.join(wdir, "model.safetensors")
    for blob in cases:
        open(path, "wb").write(blob)
        r = run(prog, "--weights", wdir)
        if r.returncode not in counts:
            fail("exit %d on a corrupt file of %d bytes:\n%s" % (r.returncode, len(blob),
                                                                   r.stderr[-2000:]))
        counts[r.returncode] += 1
    if counts[0] == 0 or counts[2] == 0:
        fail("corpus did not reach both outcomes: %s" % counts)
    print("fuzz: %d files, %d accepted, %d refused" % (len(cases), counts[0], counts[2]))


def main():
    primec, src, work, case = sys.argv[1:5]
    if case == "mpi":
        LAUNCH.extend(sys.argv[5:] + ["-n", "4"])
    os.makedirs(work, exist_ok=True)
    {"matmul": case_matmul, "mpi": case_mpi, "map": case_map, "opt": case_opt, "bad": case_bad,
     "fuzz": case_fuzz, "names": case_names, "random": case_random}[case](primec, src, work)
    print("ok")


if __name__ == "__main__":
    main()
