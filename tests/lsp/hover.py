"""primec lsp: hover on an instance shows its partition, slice table,
per-device tiles and the bytes and peak memory the schedule predicts;
hover on a partition's name shows the same for each instance using it.
Every number is compared with the compiler's own reports:
`--dump-after=partition` (slice tables) and `explain --json --ranks all`
(bytes and memory).

usage: hover.py PRIMEC FILE.prime [PARTITION]
Hovers every instance of FILE's first model; with PARTITION, also the
partition of that name declared in FILE.
"""
import json
import re
import subprocess
import sys

from lsp_client import Client, check, fail, path_uri, position_of

primec, path = sys.argv[1:3]
partition = sys.argv[3] if len(sys.argv) > 3 else None
text = open(path).read()


def run(*args):
    r = subprocess.run([primec, *args], capture_output=True, text=True)
    check(r.returncode == 0, "primec %s: %s" % (" ".join(args), r.stderr))
    return r.stdout


# The slice tables: instance -> (partition, dims [(name, size, slices,
# extent)], tiles[t][device] = [slice per dim]).
tables = {}
model = None
for line in run("check", path, "--dump-after=partition").splitlines():
    m = re.match(r"model (\S+) instance (\S+) partition (\S+) devices (\d+) steps (\d+)", line)
    if m:
        if model is None:
            model = m.group(1)
        if m.group(1) != model:
            break
        cur = tables[m.group(2)] = (m.group(3), [], [])
        continue
    m = re.match(r"\s+dim (\S+) size (\d+) slices (\d+) extent (\d+)", line)
    if m:
        cur[1].append(m.groups())
        continue
    m = re.match(r"\s+t=(\d+): (.*)", line)
    if m:
        cur[2].append([t.split() for t in re.findall(r"\[([^\]]*)\]", m.group(2))])
check(tables, "no instance in the partition dump")
explain = json.loads(run("explain", path, "--model", model, "--json", "--ranks", "all"))
cost = json.loads(run("cost", path, "--model", model, "--json"))


def expected_phase_rows(name):
    rows = []
    for ph in explain["phases"]:
        if ph["instance"] != name:
            continue
        rows.append((ph["phase"],
                     sum(mv["bytes"] for mv in ph["moves"]),
                     sum(c["bytes"] for c in ph["collectives"]),
                     sum(mv["bytes"] for mv in ph["redistributions"]),
                     ph["peak_bytes_max"]))
    return rows


def check_section(section, name):
    """One instance's part of a hover text against the compiler's reports."""
    part, dims, tiles = tables[name]
    check(re.search(r"\*\*%s\*\* = \w+\(.*\) use partition \*\*%s\*\*" % (name, part), section),
          "hover of %s does not name partition %s:\n%s" % (name, part, section))
    for d in dims:
        check("| %s | %s | %s | %s |" % d in section, "slice table row %r missing" % (d,))
    dimnames = [d[0] for d in dims]
    rows = re.findall(r"^\| (\d+) \([^)]*\) \|(.*)\|$", section, re.M)
    check(len(rows) == min(16, len(tiles[0])), "%d device rows:\n%s" % (len(rows), section))
    for dev, cells in rows:
        cells = [c.strip() for c in cells.split("|")]
        check(len(cells) == min(8, len(tiles)), "step columns of device %s: %r" % (dev, cells))
        for t, cell in enumerate(cells):
            want = " ".join("%s%s" % (dn, s) for dn, s in zip(dimnames, tiles[t][int(dev)]))
            check(cell == want, "device %s at t=%d shows %r, the slice table has %r"
                  % (dev, t, cell, want))
    found = re.findall(
        r"^\| (\S+) -> \S+(?: \(reversed\))? \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\S+) \|$",
        section, re.M)
    got = [(ph, int(a), int(b), int(c), int(d)) for ph, a, b, c, d, _ in found]
    want = expected_phase_rows(name)
    check(got == want, "phase rows of %s: %r, explain --json has %r" % (name, got, want))
    # Times: the cost model's on its default profile, as `primec cost` reports them.
    times = [float(t) for *_, t in found]
    want_times = [p["time_us"] for p in cost["phases"] if p["instance"] == name]
    check(len(times) == len(want_times) and all(
        abs(t - w) <= 5e-3 * abs(w) + 1e-9 for t, w in zip(times, want_times)),
        "phase times of %s: %r, primec cost has %r" % (name, times, want_times))
    check("on %s:" % cost["profile"] in section, "the profile %s is not named" % cost["profile"])
    per = explain["per_device"]
    total = "%d shift bytes, %d collective bytes, %d redistribution bytes; peak memory %d bytes" % (
        sum(d["shift"] for d in per), sum(d["collective"] for d in per),
        sum(d["redist"] for d in per), max(d["peak"] for d in per))
    check(total in section, "model totals %r missing:\n%s" % (total, section))


c = Client(primec)
c.initialize()
uri = path_uri(path)
check(c.open(uri, text)["diagnostics"] == [], "diagnostics on a correct file")
for name in tables:
    line, char = position_of(text, "\n    %s = " % name, 5)
    r = c.at("textDocument/hover", uri, line, char)["result"]
    check(r and r["contents"]["kind"] == "markdown", "hover on %s: %r" % (name, r))
    check(r["range"]["start"]["line"] == line, "hover range %r" % r["range"])
    check_section(r["contents"]["value"], name)
    print("ok: hover on instance %s (partition %s)" % (name, tables[name][0]))
if partition:
    line, char = position_of(text, "partition %s of" % partition, len("partition "))
    r = c.at("textDocument/hover", uri, line, char)["result"]
    value = r["contents"]["value"]
    check(value.startswith("partition **%s** of" % partition), "partition hover:\n%s" % value)
    users = [n for n, t in tables.items() if t[0] == partition]
    sections = value.split("\n---\n")[1:]
    check(len(sections) == len(users), "%d sections for %d instances using %s"
          % (len(sections), len(users), partition))
    for section, name in zip(sections, users):
        check_section(section, name)
    print("ok: hover on partition %s (%d instances)" % (partition, len(users)))
# Nowhere in particular: no hover.
r = c.at("textDocument/hover", uri, 0, 0)
check(r["result"] is None, "hover on a comment: %r" % r)
c.finish()
print("ok")
