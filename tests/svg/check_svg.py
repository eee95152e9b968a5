#!/usr/bin/env python3
"""Checks the pictures of `primec explain --svg` (and `primec plan --svg`)
by their structure, against what `primec explain --json` and `primec cost
--json` say about the same model.

    check_svg.py explain PRIMEC FILE MODEL WORKDIR
    check_svg.py plan PRIMEC FILE MODEL WORKDIR

explain: every phase that computes or redistributes has its file; per
step panel, every device's squares hold the tiles the schedule says (the
step's operand tiles, from the JSON) and are filled with the colour the
legend gives that tile; tiles of one tensor have distinct colours; the
arrows after a step are the transfers of its moves (by kind, accumulators
dashed); the collective marks are the groups' members; a redistribution
panel shows the needed layout and one arrow (or dot) per transfer; the
timeline's step time, phases and per-rank compute are the cost model's.
plan: the plan file holds the chosen plan's and the pinned partitions'
timelines, whose step times are the plan report's.
"""
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"
MAX_STEPS = 16
MAX_STEP_DEVICES = 2048
MAX_REDIST = 8
MAX_LEGEND = 64
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("command failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stderr))
    return r.stdout


def cls(el):
    return el.get("class", "")


def all_of(root, name):
    return [e for e in root.iter() if cls(e) == name]


def tile_key(coords):
    return ",".join(str(c) for c in coords)


def legend_fills(root):
    """{tensor: {tile: fill}} from the legend swatches."""
    out = {}
    for g in all_of(root, "legend"):
        fills = {}
        for sw in g.iter():
            if cls(sw) == "swatch":
                fills[sw.get("data-tile")] = sw.get("fill")
        out[g.get("data-tensor")] = fills
    return out


def tiles_by_rank(panel):
    """{rank: [(tensor, tile, fill)]} of a panel, in drawing order."""
    out = {}
    for t in panel.iter():
        if cls(t) == "tile":
            out.setdefault(int(t.get("data-rank")), []).append(
                (t.get("data-tensor"), t.get("data-tile"), t.get("fill")))
    return out


def arrows(panel, kinds):
    return [e for e in panel.iter() if cls(e) in kinds or cls(e) in [k + "-local" for k in kinds]]


def check_fills(where, tiles, legend):
    for tensor, tile, fill in tiles:
        lf = legend.get(tensor, {})
        if tile in lf:
            check(fill == lf[tile], "%s: %s%s filled %s, legend says %s" %
                  (where, tensor, tile, fill, lf[tile]))


def check_step_panel(name, panel, st, phase, legend, ndev):
    step = phase["steps"][st]
    check(int(panel.get("data-t")) == step["t"], "%s step %d: t" % (name, st))
    got = tiles_by_rank(panel)
    for dev in step["devices"]:
        r = dev["rank"]
        want = sorted((tn, tile_key(c)) for tn, c in dev["tiles"].items())
        have = sorted(set((tn, tile) for tn, tile, _ in got.get(r, [])))
        check(have == want, "%s step %d rank %d: tiles %s, the schedule says %s" %
              (name, st, r, have, want))
        check_fills("%s step %d rank %d" % (name, st, r), got.get(r, []), legend)
    check(len(all_of(panel, "device")) == ndev, "%s step %d: device boxes" % (name, st))
    moves = [m for m in phase["moves"] if m["after_step"] == st]
    for kind in ("shift", "permutation", "exchange"):
        want = sum(m["transfers"] for m in moves if m["kind"] == kind)
        check(len(arrows(panel, [kind])) == want,
              "%s step %d: %d %s arrows, %d transfers" %
              (name, st, len(arrows(panel, [kind])), kind, want))
    acc = sum(m["transfers"] for m in moves if m["accumulator"])
    dashed = [e for e in arrows(panel, ["shift", "permutation", "exchange"]) if e.get("data-acc")]
    check(len(dashed) == acc, "%s step %d: accumulator arrows" % (name, st))
    for m in moves:
        drawn = {e.get("data-tensor") for e in arrows(panel, [m["kind"]])}
        check(m["tensor"] in drawn, "%s step %d: no arrow of %s" % (name, st, m["tensor"]))


def check_phase_file(name, root, k, phase, ndev):
    panels = all_of(root, "panel")
    check(len(all_of(root, "device")) == ndev * len(panels),
          "%s: device boxes = devices x panels" % name)
    legend = legend_fills(root)
    for tensor, fills in legend.items():
        n = len(fills)
        check(len(set(fills.values())) == n, "%s: tiles of %s share colours" % (name, tensor))
    steps = [p for p in panels if p.get("data-kind") == "step"]
    nsteps = len(phase.get("steps", []))
    cap = min(MAX_STEPS, max(2, MAX_STEP_DEVICES // ndev))
    check(len(steps) == min(nsteps, cap), "%s: %d step panels for %d steps" %
          (name, len(steps), nsteps))
    for p in steps:
        check_step_panel(name, p, int(p.get("data-step")), phase, legend, ndev)
    coll = [p for p in panels if p.get("data-kind") == "collectives"]
    check(len(coll) == (1 if nsteps and phase["collectives_total"] else 0),
          "%s: collectives panel" % name)
    if coll:
        marks = all_of(coll[0], "collective")
        want = sum(len(c["group"]) for c in phase["collectives"])
        check(len(marks) == want, "%s: %d collective marks, %d members" % (name, len(marks), want))
        check(len(all_of(coll[0], "collective-group")) == len(phase["collectives"]),
              "%s: one line per collective group" % name)
        for g, c in enumerate(phase["collectives"]):
            members = sorted(int(m.get("data-rank")) for m in marks if int(m.get("data-group")) == g)
            check(members == sorted(c["group"]), "%s: group %d members" % (name, g))
    red = [p for p in panels if p.get("data-kind") == "redistribution"]
    check(len(red) == min(len(phase["redistributions"]), MAX_REDIST),
          "%s: redistribution panels" % name)
    for p, mv in zip(red, phase["redistributions"]):
        check(p.get("data-tensor") == mv["tensor"], "%s: redistribution tensor" % name)
        n = len(arrows(p, ["redist"]))
        check(n == mv["transfers"], "%s: %d redistribution arrows, %d transfers" %
              (name, n, mv["transfers"]))
        got = tiles_by_rank(p)
        for r, need in enumerate(mv["need"]):
            have = [tile for _, tile, _ in got.get(r, [])]
            want = [tile_key(c) for c in need]
            check(have == want[:len(have)] and (len(have) >= 1 or not want),
                  "%s: redistribution rank %d holds %s, needs %s" % (name, r, have, want))
            check_fills("%s redistribution rank %d" % (name, r), got.get(r, []), legend)


def check_timeline(name, tl, cost):
    check(tl.get("data-step-us") == "%.6g" % cost["step_us"],
          "%s: step %s us, the cost model says %.6g" % (name, tl.get("data-step-us"), cost["step_us"]))
    phases = all_of(tl, "phase")
    check(len(phases) == len(cost["phases"]), "%s: phase bands" % name)
    end = 0.0
    for p, c in zip(phases, cost["phases"]):
        end += c["time_us"]
        check(abs(float(p.get("data-end-us")) - end) <= 1e-4 * max(1.0, end),
              "%s: phase %s ends at %s us, not %.6g" % (name, c["name"], p.get("data-end-us"), end))
    drawn = int(tl.get("data-ranks-drawn"))
    compute = [0.0] * drawn
    last_end = [0.0] * drawn
    for e in all_of(tl, "compute"):
        r = int(e.get("data-rank"))
        s, t = float(e.get("data-start-us")), float(e.get("data-end-us"))
        check(s >= last_end[r] - 1e-3, "%s: rank %d computes twice at %g us" % (name, r, s))
        last_end[r] = t
        compute[r] += t - s
    if drawn == cost["devices"]:
        most = max(compute)
        check(abs(most - cost["compute_us"]) <= 1e-3 * max(1.0, cost["compute_us"]),
              "%s: slowest rank computes %.6g us, the cost model says %.6g" %
              (name, most, cost["compute_us"]))
    comm = sum(len(all_of(tl, k)) for k in ("shift", "collective", "redist"))
    busy = cost["bytes"]["p2p"] + cost["bytes"]["collective"]
    check((comm > 0) == (busy > 0), "%s: communication bars but no bytes, or bytes and no bars" % name)


def explain(primec, src, model, work):
    out = os.path.join(work, "svg")
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(out + "2", ignore_errors=True)
    info = json.loads(run([primec, "explain", src, "--model", model, "--json", "--ranks", "all"]))
    listed = run([primec, "explain", src, "--model", model, "--svg", out]).split()
    again = run([primec, "explain", src, "--model", model, "--svg", out + "2"]).split()
    ndev = info["devices"]
    want = []
    for k, ph in enumerate(info["phases"]):
        if not ph.get("steps") and not ph["redistributions"]:
            continue
        suffix = ("." + ph["instance"]) if ph.get("steps") else ""
        want.append(os.path.join(out, "%s.%02d.%s%s.svg" % (model, k, ph["phase"], suffix)))
        path = want[-1]
        check(os.path.exists(path), "missing %s" % path)
        if not os.path.exists(path):
            continue
        check_phase_file(os.path.basename(path), ET.parse(path).getroot(), k, ph, ndev)
    timeline = os.path.join(out, "%s.timeline.svg" % model)
    want.append(timeline)
    check(listed == want, "listed files %s, expected %s" % (listed, want))
    for a, b in zip(listed, again):
        with open(a, "rb") as fa, open(b, "rb") as fb:
            check(fa.read() == fb.read(), "%s differs from run to run" % a)
    cost = json.loads(run([primec, "cost", src, "--model", model, "--json", "--profile", "v100"]))
    tls = all_of(ET.parse(timeline).getroot(), "timeline")
    check(len(tls) == 1, "one timeline")
    check_timeline(os.path.basename(timeline), tls[0], cost)
    return len(listed)


def plan(primec, src, model, work):
    out = os.path.join(work, "plan-svg")
    shutil.rmtree(out, ignore_errors=True)
    report = json.loads(run([primec, "plan", src, "--model", model, "--json"]))
    run([primec, "plan", src, "--model", model, "--svg", out])
    path = os.path.join(out, "%s.plan.svg" % model)
    root = ET.parse(path).getroot()
    tls = all_of(root, "timeline")
    sides = [("chosen", report["schedule"], report["dp"])]
    if report["pinned"]:
        sides.append(("pinned", report["pinned"]["schedule"], report["pinned"]["dp"]))
    check(len(tls) == len(sides), "%s: %d timelines, expected %d" % (path, len(tls), len(sides)))
    for (label, sched, dp), tl in zip(sides, tls):
        check(os.path.isdir(os.path.join(out, label)), "no %s pictures" % label)
        # The plan adds the data-parallel all-reduce to one replica's step.
        if dp == 1 and "time_s" in sched:
            want = sched["time_s"] * 1e6
            got = float(tl.get("data-step-us"))
            check(abs(got - want) <= 1e-4 * max(1.0, want),
                  "%s: %s step %.6g us, plan says %.6g" % (path, label, got, want))
    return len(tls)


def main():
    if len(sys.argv) != 6 or sys.argv[1] not in ("explain", "plan"):
        sys.exit(__doc__)
    mode, primec, src, model, work = sys.argv[1:]
    os.makedirs(work, exist_ok=True)
    n = (explain if mode == "explain" else plan)(primec, src, model, work)
    if FAILURES:
        for f in FAILURES[:40]:
            print("FAIL:", f)
        print("%d failures" % len(FAILURES))
        sys.exit(1)
    print("%s %s: %d files checked" % (mode, model, n))


main()
