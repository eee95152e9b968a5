"""device_trace.py [--gpu] TRACE — the device row of a CUDA program's
--trace (runtime/prime_cuda_ops.c, pcu_finish): on every device, one
interval on tid 2 per kernel call, in the order of the host's kernel
intervals (tid 0, every interval but the steps), with the same names,
each inside the host's interval of its call (the host emulation times a
call inside it). With --gpu (tests/gpu/run.sh) a kernel runs after its
launch, not inside it: each device interval must start no earlier than
its launch (less 50 us for the anchor's placement) and after the one
before it on the stream ends (less 1 us)."""
import json
import sys

gpu = sys.argv[1] == "--gpu"
events = json.load(open(sys.argv[-1]))["traceEvents"]
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
    last_end = None
    for h, d in zip(host, dev):
        # Times are microseconds with three decimals: a nanosecond of slack.
        if gpu:
            bad = d["ts"] < h["ts"] - 50 or (last_end is not None and d["ts"] < last_end - 1)
            last_end = d["ts"] + d["dur"]
        else:
            bad = d["ts"] < h["ts"] - 1e-3 or d["ts"] + d["dur"] > h["ts"] + h["dur"] + 2e-3
        if bad:
            failed.append("device %d: %s at %.3f+%.3f outside the host's %.3f+%.3f"
                          % (pid, d["name"], d["ts"], d["dur"], h["ts"], h["dur"]))
            break
    total += len(dev)
for f in failed[:10]:
    print("FAIL", f)
if not failed and total:
    print("device trace: %d kernel intervals on %d devices, each inside its call" % (total, len(devices)))
sys.exit(1 if failed or not total else 0)
