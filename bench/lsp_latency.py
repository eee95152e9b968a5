"""How long `primec lsp` takes to answer, per example: didOpen to its
publishDiagnostics (the whole pipeline on the text), a hover on the
file's first instance statement, and a completion after `use`.

usage: python3 bench/lsp_latency.py PRIMEC [FILE.prime ...]
(default: examples/*.prime). Prints a Markdown table; median of 5 runs.
"""
import glob
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lsp"))
from lsp_client import Client, path_uri  # noqa: E402

primec = sys.argv[1]
files = sys.argv[2:] or sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..",
                                                      "examples", "*.prime")))
print("| file | lines | open -> diagnostics ms | hover ms | completion ms |")
print("|---|---|---|---|---|")
c = Client(primec)
c.initialize()
for path in files:
    text = open(path).read()
    uri = path_uri(path)
    m = re.search(r"^(\s*)\w+ = \w+\(.*\) use (\w+)", text, re.M)
    line = text.count("\n", 0, m.start()) if m else 0
    col = len(m.group(1)) if m else 0
    use_col = (m.end() - m.start() - len(m.group(2))) if m else 0
    opens, hovers, completions = [], [], []
    for v in range(5):
        t0 = time.perf_counter()
        if v == 0:
            c.open(uri, text)
        else:
            c.change(uri, v + 1, text)
        opens.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        c.at("textDocument/hover", uri, line, col)
        hovers.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        c.at("textDocument/completion", uri, line, use_col)
        completions.append(time.perf_counter() - t0)
    c.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    c.read_notification("textDocument/publishDiagnostics")
    print("| %s | %d | %.1f | %.1f | %.1f |" % (
        os.path.basename(path), text.count("\n"), 1e3 * statistics.median(opens),
        1e3 * statistics.median(hovers), 1e3 * statistics.median(completions)))
c.finish()
