"""dtype_errors.py F32.json BF16.json F16.json — the --check reports (--json)
of one model built with --dtype f32, bf16 and f16, run on the same data:
every tensor passes in each; every tensor's bf16 and f16 error is above
the bound of the f32 build (the f32 tolerance would fail them); the worst
errors are ordered bf16 > f16 > f32. Prints the worst error, error / dense
and error / bound of each.

dtype_errors.py --device-f32 BF16.json — a bf16 build whose device GEMMs
ran in fp32 (PCU_HOST_GEMM=f32): every tensor's error is under a hundredth
of the dense bf16 program's, so the bf16 runs' error is the device's
rounding, not the reference's."""
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)["check"]


def dense(entry):
    return next(v for k, v in entry.items() if k.startswith("dense_"))


def main(argv):
    if argv[1] == "--device-f32":
        check = load(argv[2])
        bad = [t for t, e in check.items() if not e["error"] < dense(e) / 100]
        if bad:
            print("FAIL: device fp32 GEMMs, yet errors near the dense bf16 ones:", bad)
            return 1
        print("device fp32 GEMMs: worst error %.3e, every tensor under dense bf16 / 100"
              % max(e["error"] for e in check.values()))
        return 0
    names = ("f32", "bf16", "f16")
    checks = dict(zip(names, (load(p) for p in argv[1:4])))
    worst = {}
    for name, check in checks.items():
        if set(check) != set(checks["f32"]):
            print("FAIL: %s checks other tensors than f32" % name)
            return 1
        failed = [t for t, e in check.items() if not e["ok"]]
        if failed:
            print("FAIL: %s: tensors failed:" % name, failed)
            return 1
        worst[name] = max(e["error"] for e in check.values())
        print("%-4s worst error %.3e, worst error / dense %.2f, worst error / bound %.2f (%d tensors)"
              % (name, worst[name], max(e["error"] / max(dense(e), 1e-30) for e in check.values()),
                 max(e["error"] / e["bound"] for e in check.values()), len(check)))
    for name in ("bf16", "f16"):
        under = [t for t, e in checks[name].items() if not e["error"] > checks["f32"][t]["bound"]]
        if under:
            print("FAIL: %s errors within the f32 bound (not measured?):" % name, under)
            return 1
    if not worst["bf16"] > worst["f16"] > worst["f32"]:
        print("FAIL: worst errors not ordered bf16 > f16 > f32:", worst)
        return 1
    print("every bf16 and f16 error is past the f32 bound of its tensor")
    return 0


sys.exit(main(sys.argv))
