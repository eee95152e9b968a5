#!/usr/bin/env python3
"""same_grads.py A.safetensors B.safetensors: the two gradient files hold the
same tensors (names, shapes, F32) with values equal to fp32 rounding: for
each tensor, max |a - b| <= 1e-5 * max(max |b|, 1e-30). Prints one line per
tensor; exits 1 on any difference."""
import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in head.items():
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        if t["dtype"] != "F32":
            sys.exit("%s: %s is %s, not F32" % (path, name, t["dtype"]))
        out[name] = (tuple(t["shape"]), struct.unpack("<%df" % ((hi - lo) // 4), data[lo:hi]))
    return out


a, b = read(sys.argv[1]), read(sys.argv[2])
if sorted(a) != sorted(b):
    sys.exit("tensors differ: %s against %s" % (sorted(a), sorted(b)))
bad = 0
for name in sorted(a):
    (sa, va), (sb, vb) = a[name], b[name]
    if sa != sb:
        print("%s: shape %s against %s" % (name, sa, sb))
        bad += 1
        continue
    ref = max([abs(x) for x in vb] + [1e-30])
    diff = max([abs(x - y) for x, y in zip(va, vb)] + [0.0])
    ok = diff <= 1e-5 * ref
    print("%s %s: max difference %.3g of %.3g %s" % (name, list(sa), diff, ref, "ok" if ok else "DIFFERS"))
    bad += not ok
sys.exit(1 if bad else 0)
