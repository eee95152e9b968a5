"""explain of a mesh of more than 64 devices with replica axes analyses one
replica (schedule_summary_from); with PRIMEC_FULL_SIMULATION=1 it simulates
every rank. Both reports must agree on everything but the analysis line and
the program form (which only every rank's lists give): per-device bytes and
peaks, every phase's steps, moves, collectives (as a multiset: the
expansion makes them in another order), redistributions with the layouts
of the listed ranks, and the stored tensors' replication.

usage: explain_summary.py PRIMEC FILE MODEL [--param ...]"""
import json
import os
import subprocess
import sys

primec, source, model = sys.argv[1:4]
params = sys.argv[4:]


def explain(full, fmt):
    env = dict(os.environ)
    env.pop("PRIMEC_FULL_SIMULATION", None)
    if full:
        env["PRIMEC_FULL_SIMULATION"] = "1"
    cmd = [primec, "explain", source, "--model", model, "--ranks", "16"] + fmt + params
    return subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout


def phase_key(p):
    p = dict(p)
    p["collectives"] = sorted(json.dumps(c, sort_keys=True) for c in p["collectives"])
    return p


summary, full = (json.loads(explain(f, ["--json"])) for f in (False, True))
failed = []
if summary["analysis"]["simulated"] != "one replica":
    failed.append("the summary simulated %s" % summary["analysis"]["simulated"])
if full["analysis"]["simulated"] != "every rank":
    failed.append("the full analysis simulated %s" % full["analysis"]["simulated"])
if summary["program_form"] is not None or full["program_form"] is None:
    failed.append("program form: %s / %s" % (summary["program_form"], full["program_form"]))
for key in full:
    if key not in ("analysis", "program_form", "phases") and summary.get(key) != full[key]:
        failed.append("differs: " + key)
if len(summary["phases"]) != len(full["phases"]):
    failed.append("phases: %d / %d" % (len(summary["phases"]), len(full["phases"])))
held = 0
for i, (a, b) in enumerate(zip(summary["phases"], full["phases"])):
    a, b = phase_key(a), phase_key(b)
    held += sum(len(dev) for r in b["redistributions"] for dev in r["have"] + r["need"])
    for key in b:
        if a.get(key) != b[key]:
            failed.append("phase %d (%s of %s): %s" % (i, b["phase"], b["instance"], key))

# The text report: the same lines up to the program form (the collectives
# of a phase in another order).
text = [explain(f, []).splitlines() for f in (False, True)]
head = [t[: next(i for i, l in enumerate(t) if l.startswith("program form:"))] for t in text]
if sorted(head[0]) != sorted(head[1]):
    failed.append("the text reports differ")
if not text[0][-1].startswith("analysis: one replica of"):
    failed.append("text: " + text[0][-1])

# Per-device detail is asked for above 64 devices: none listed by default.
listed = json.loads(subprocess.run([primec, "explain", source, "--model", model, "--json"] + params,
                                   check=True, capture_output=True, text=True).stdout)
if listed["ranks_listed"] != 0 or listed["per_device"]:
    failed.append("listed by default: %d ranks" % listed["ranks_listed"])

redist = sum(len(p["redistributions"]) for p in full["phases"])
colls = sum(p["collectives_total"] for p in full["phases"])
print("%s: %d devices, %d phases, %d collectives, %d redistributions (%d tiles listed in "
      "their layouts), %d stored tensors" % (model, summary["devices"], len(full["phases"]), colls,
                                             redist, held, len(full["tensors"])))
for f in failed[:20]:
    print("FAIL", f)
if not failed:
    print("the one-replica summary equals every rank's analysis")
sys.exit(1 if failed else 0)
