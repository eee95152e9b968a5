"""device_trace.py TRACE — the device row of a CUDA program's --trace
(runtime/prime_cuda_ops.c, pcu_finish): on every device, one interval on
tid 2 per kernel call, in the order of the host's kernel intervals (tid
0, every interval but the steps), with the same names, each inside the
host's interval of its call (the host emulation times a call inside
it)."""
import json
import sys

events = json.load(open(sys.argv[1]))["traceEvents"]
rows = {}
names = {}
for e in events:
    if e["ph"] == "M" and e["name"] == "thread_name":
        names[(e["pid"], e["tid"])] = e["args"]["name"]
    if e["ph"] == "X":
        rows.setdefault((e["pid"], e["tid"]), []).append(e)
failed = []
devices = sorted({pid for pid, _ in rows})
total = 0
for pid in devices:
    host = [e for e in rows.get((pid, 0), []) if e["name"] != "step"]
    dev = rows.get((pid, 2), [])
    if names.get((pid, 2)) != "device kernels":
        failed.append("device %d: no device row named (%s)" % (pid, names.get((pid, 2))))
    if [e["name"] for e in host] != [e["name"] for e in dev]:
        failed.append("device %d: %d host kernel intervals, %d device ones, or other names"
                      % (pid, len(host), len(dev)))
        continue
    for h, d in zip(host, dev):
        # Times are microseconds with three decimals: a nanosecond of slack.
        if d["ts"] < h["ts"] - 1e-3 or d["ts"] + d["dur"] > h["ts"] + h["dur"] + 2e-3:
            failed.append("device %d: %s at %.3f+%.3f outside the host's %.3f+%.3f"
                          % (pid, d["name"], d["ts"], d["dur"], h["ts"], h["dur"]))
            break
    total += len(dev)
for f in failed[:10]:
    print("FAIL", f)
if not failed and total:
    print("device trace: %d kernel intervals on %d devices, each inside its call" % (total, len(devices)))
sys.exit(1 if failed or not total else 0)
