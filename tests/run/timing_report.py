#!/usr/bin/env python3
"""timing_report.py PRIMEC MODEL.prime NAME DIR

The time report of a built program (docs/timing.md), checked by structure
on a real run (tests/hang.cmake registers it):

  - --json: step_time > 0 and equal to timing.wall_time; GFLOP/s equal to
    FLOPs over the wall time, for the step and every phase; the counted
    FLOPs equal `primec cost --json`'s (of the schedule before the kernels
    pass) less those of the copies the kernels pass removed (the
    `copy phase ...` lines of --dump-after=kernels, docs/kernels.md
    "Copies gone": kernels the program no longer runs); kernel, exposed communication and
    overhead times non-negative (overhead up to clock jitter) and adding
    up to at most the wall time; every phase's wall time at most the
    step's; the phases' counts adding up to the step's.
  - --trace: per device a compute row (tid 0) and a communication row
    (tid 1), both named; on the communication row one "send ..." span per
    send the device posted and one collective span per collective it ran
    (the counts of --json), a "recv from" span per receive; on the compute
    row one kernel interval per kernel, and every step with its split
    (kernel, exposed communication, overhead) adding up to its duration.
  - the text report holds the timing lines, and no progress line when
    stdout is a file; under a terminal (a pty) the progress line appears
    and is erased at the end.

Prints PASS or FAIL with the reason last.
"""
import json
import os
import pty
import re
import subprocess
import sys

REPEAT = 5


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def close(a, b, rel=1e-6):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-30)


def check_row(where, row, wall_cap):
    wall = row["wall_time"]
    if wall < 0 or wall > wall_cap * (1 + 1e-9):
        fail("%s: wall time %g outside [0, %g]" % (where, wall, wall_cap))
    if wall > 0 and not close(row["gflops"], row["flops"] / wall / 1e9, 1e-5):
        fail("%s: gflops %g is not flops / wall time (%g / %g)" % (where, row["gflops"],
                                                                   row["flops"], wall))
    for k in ("kernel_time", "exposed_comm_time"):
        if row[k] < 0:
            fail("%s: negative %s" % (where, k))
    # Overhead is a difference of clock readings: allow 1 us of jitter.
    if row["overhead_time"] < -1e-6:
        fail("%s: overhead %g < 0" % (where, row["overhead_time"]))
    parts = row["kernel_time"] + row["exposed_comm_time"] + row["overhead_time"]
    if parts > wall * (1 + 1e-6) + 1e-9:
        fail("%s: kernel + exposed + overhead = %g > wall %g" % (where, parts, wall))
    if row["exposed_comm_time"] > wall * (1 + 1e-9):
        fail("%s: exposed communication above the wall time" % where)


def check_json(j, cost):
    st = j.get("step_time")
    t = j.get("timing")
    if st is None or t is None:
        fail("--json has no step_time or timing")
    if not st > 0:
        fail("step_time %r is not positive" % st)
    if st != t["wall_time"]:
        fail("step_time %g differs from timing.wall_time %g" % (st, t["wall_time"]))
    if not t.get("process_cpu_time", 0) > 0:
        fail("timing.process_cpu_time %r is not positive" % t.get("process_cpu_time"))
    if not t.get("blas_core"):
        fail("timing.blas_core is empty")
    if t["repeat"] != REPEAT:
        fail("timing.repeat %d, not %d" % (t["repeat"], REPEAT))
    check_row("step", t, st)
    if not close(t["flops"], cost["flops"], 1e-5):
        fail("counted FLOPs %g differ from primec cost's %g" % (t["flops"], cost["flops"]))
    if t["kernels"] > 0 and not t["flops"] > 0:
        fail("kernels ran but no FLOPs counted")
    for k in ("flops", "kernels", "sends", "collectives"):
        total = sum(p[k] for p in t["phases"])
        if not close(total, t[k]):
            fail("the phases' %s add up to %g, the step has %g" % (k, total, t[k]))
    for p in t["phases"]:
        check_row("phase '%s'" % p["name"], p, st)
        steps = p["steps"] or 1
        if not close(p["step_time"], p["wall_time"] / steps):
            fail("phase '%s': step_time is not wall / steps" % p["name"])
    for k in ("sends", "collectives"):
        if sum(r[k] for r in j["ranks"]) != t[k]:
            fail("ranks' %s do not add up to the step's" % k)


def check_trace(trace, j):
    ev = trace["traceEvents"]
    ndev = j["devices"]
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in ev
             if e["ph"] == "M" and e["name"] == "thread_name"}
    kernels = 0
    for r in range(ndev):
        if names.get((r, 0)) != "compute" or names.get((r, 1)) != "communication":
            fail("device %d: rows not named compute / communication: %r" % (r, names))
        comm = [e for e in ev if e["ph"] == "X" and e["pid"] == r and e["tid"] == 1]
        comp = [e for e in ev if e["ph"] == "X" and e["pid"] == r and e["tid"] == 0]
        rank = j["ranks"][r]
        sends = [e for e in comm if e["name"].startswith("send ")]
        recvs = [e for e in comm if e["name"].startswith("recv from ")]
        colls = [e for e in comm if e["name"] in ("allreduce", "reduce_scatter", "allgather")]
        if len(sends) != rank["sends"]:
            fail("device %d: %d send spans, %d sends counted" % (r, len(sends), rank["sends"]))
        if len(colls) != rank["collectives"]:
            fail("device %d: %d collective spans, %d collectives" % (r, len(colls),
                                                                      rank["collectives"]))
        if len(sends) + len(recvs) + len(colls) != len(comm):
            fail("device %d: unknown spans on the communication row" % r)
        moved = rank["shift"] + rank["redist"]
        if moved > 0 and not sends:
            fail("device %d sent %d bytes and has no send span" % (r, moved))
        for e in sends:
            kind = e["name"].split()[1]
            if kind not in ("shift", "collective", "redist"):
                fail("device %d: span '%s' names no byte kind" % (r, e["name"]))
        if any(e["dur"] < 0 for e in comm + comp):
            fail("device %d: a negative duration" % r)
        kernels += sum(1 for e in comp if e["name"] != "step")
        # Every step carries its split; the parts add up to its duration
        # (overhead is what is left, 0 if clock jitter leaves nothing).
        for e in comp:
            if e["name"] != "step":
                continue
            a = e.get("args")
            if a is None:
                fail("device %d: a step without its kernel/communication/overhead split" % r)
            parts = a["kernel_us"] + a["exposed_comm_us"] + a["overhead_us"]
            if min(a.values()) < 0 or (a["overhead_us"] > 0 and abs(parts - e["dur"]) > 0.0015):
                fail("device %d: step split %r does not add up to its %g us" % (r, a, e["dur"]))
            inner = sum(k["dur"] for k in comp
                        if k["name"] != "step" and e["ts"] <= k["ts"] <= e["ts"] + e["dur"])
            if a["kernel_us"] > inner + 0.01 * len(comp) + 1:
                fail("device %d: a step's kernel time %g exceeds its kernels' %g" % (
                    r, a["kernel_us"], inner))
    if kernels != j["timing"]["kernels"]:
        fail("%d kernel intervals in the trace, %d kernels counted" % (kernels,
                                                                       j["timing"]["kernels"]))


def check_progress(exe):
    """Under a pty with PRIME_PROGRESS_AFTER=0 the progress line shows."""
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["PRIME_PROGRESS_AFTER"] = "0"
        os.execv(exe, [exe, "--repeat", "8"])
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        fail("the run under a terminal failed")
    text = out.decode(errors="replace")
    if " of 8 (" not in text:
        fail("no progress line on a terminal: %r" % text[:300])
    if "\r\x1b[K" not in text:
        fail("the progress line was not erased")


def main():
    primec, model, name, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    exe = subprocess.run([primec, "build", model, "--model", name, "--target", "cpu", "-o", work],
                         capture_output=True, text=True)
    if exe.returncode != 0:
        fail("primec build: " + exe.stderr)
    exe = exe.stdout.strip().splitlines()[-1]
    cost = subprocess.run([primec, "cost", model, "--model", name, "--json"],
                          capture_output=True, text=True)
    if cost.returncode != 0:
        fail("primec cost: " + cost.stderr)
    js, tr, out = (os.path.join(work, f) for f in ("run.json", "trace.json", "out.txt"))
    with open(out, "w") as f:
        rc = subprocess.run([exe, "--repeat", str(REPEAT), "--json", js, "--trace", tr],
                            stdout=f, env=dict(os.environ, PRIME_PROGRESS_AFTER="0")).returncode
    if rc != 0:
        fail("the program exited %d" % rc)
    text = open(out).read()
    if "time per training step (median of %d runs)" % REPEAT not in text:
        fail("the report has no timing line:\n" + text)
    if "\r" in text or " of %d (" % REPEAT in text:
        fail("a progress line went to a file")
    dump = subprocess.run([primec, "check", model, "--model", name, "--dump-after=kernels"],
                          capture_output=True, text=True)
    if dump.returncode != 0:
        fail("primec check --dump-after=kernels: " + dump.stderr)
    gone = sum(float(m.group(1)) for m in
               re.finditer(r"^ copy phase .*\(no tile, no kernel, (\S+) FLOPs\)$", dump.stdout, re.M))
    cost = json.loads(cost.stdout)
    cost["flops"] -= gone
    j = json.load(open(js))
    check_json(j, cost)
    check_trace(json.load(open(tr)), j)
    check_progress(exe)
    print("PASS")


if __name__ == "__main__":
    main()
