"""What the plan benchmarks share: listing a file's runs, `primec explain
--json`, building and running a model with --check, and formatting bytes.

Imported by dp_table.py and compare_plans.py (run them from any folder:
they put bench/ on the path themselves).
"""
import json
import os
import subprocess
import sys


def models_in(primec, path):
    """The models and runs of a .prime file that `primec check` passes."""
    out = subprocess.run([primec, "check", path], capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise SystemExit("primec check failed on %s" % path)
    return [line.split(":")[0] for line in out.stdout.splitlines() if ": ok:" in line]


def explain(primec, path, model):
    out = subprocess.run([primec, "explain", path, "--model", model, "--json"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def measure(primec, path, model, workdir):
    """Builds the model into workdir, runs it with --check and returns its
    --json report; exits when the check does not pass."""
    subprocess.run([primec, "build", path, "--model", model, "-o", workdir],
                   capture_output=True, text=True, check=True)
    js = os.path.join(workdir, model + ".json")
    run = subprocess.run([os.path.join(workdir, model), "--check", "--json", js],
                         capture_output=True, text=True)
    if run.returncode != 0 or "check passed" not in run.stdout:
        sys.stderr.write(run.stdout + run.stderr)
        raise SystemExit("%s --check failed" % model)
    with open(js) as f:
        return json.load(f)


def fmt_bytes(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return "%.2f %s" % (n / size, unit)
    return "%d B" % n
