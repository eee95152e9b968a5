"""primec lsp: diagnostics on open and on change carry the compiler's own
messages with the ranges `primec check` underlines.

usage: diagnostics.py PRIMEC CASE.prime FIXED.prime
CASE has errors; FIXED is a text without any.
"""
import re
import subprocess
import sys

from lsp_client import Client, check, path_uri

primec, case, fixed = sys.argv[1:4]
text = open(case).read()

# What `primec check` reports: file:LINE:COL: error: MESSAGE, then the
# source line and the ^~~~ underline of the span.
cli = subprocess.run([primec, "check", case], capture_output=True, text=True)
check(cli.returncode == 1, "primec check %s: exit %d" % (case, cli.returncode))
lines = cli.stderr.splitlines()
expected = []
notes = []  # per expected diagnostic: (file name, line, col, message) of its located notes
for i, line in enumerate(lines):
    m = re.match(r".*?:(\d+):(\d+): (error|warning): (.*)$", line)
    if m:
        # Columns count bytes and the underline code points; LSP counts
        # UTF-16 units.
        line_no, col = int(m.group(1)) - 1, int(m.group(2)) - 1
        caret = lines[i + 2]
        width = len(caret.rstrip()) - caret.index("^")
        src = text.split("\n")[line_no]
        start_cp = len(src.encode()[:col].decode())
        units = lambda t: len(t.encode("utf-16-le")) // 2
        start = units(src[:start_cp])
        expected.append((line_no, start, units(src[start_cp:start_cp + width]), m.group(4)))
        notes.append([])
    m = re.match(r"(.*?):(\d+):(\d+): note: (.*)$", line)
    if m and notes:
        notes[-1].append((m.group(1).split("/")[-1], int(m.group(2)) - 1, int(m.group(3)) - 1,
                          m.group(4)))
check(expected, "no located diagnostic from primec check: %r" % cli.stderr)

c = Client(primec)
c.initialize()
uri = path_uri(case)
got = c.open(uri, text)
check(got["uri"] == uri, "diagnostics for %r" % got["uri"])
diags = got["diagnostics"]
check(len(diags) == len(expected), "%d diagnostics, primec check has %d: %r"
      % (len(diags), len(expected), diags))
for d, (line, col, width, message), want in zip(diags, expected, notes):
    r = d["range"]
    check(d["message"].split("\n")[0] == message, "message %r, expected %r" % (d["message"], message))
    check(d["severity"] == 1 and d["source"] == "primec", "severity/source: %r" % d)
    check(r["start"] == {"line": line, "character": col}, "start %r, expected %d:%d"
          % (r["start"], line, col))
    check(r["end"] == {"line": line, "character": col + width}, "end %r, expected %d:%d"
          % (r["end"], line, col + width))
    related = d.get("relatedInformation", [])
    check(len(related) == len(want), "related information %r, expected the notes %r"
          % (related, want))
    for rel, (name, nline, ncol, nmessage) in zip(related, want):
        loc = rel["location"]
        check(loc["uri"].startswith("file://") and loc["uri"].split("/")[-1] == name
              and loc["range"]["start"] == {"line": nline, "character": ncol}
              and rel["message"] == nmessage, "note %r, expected %s:%d:%d %s"
              % (rel, name, nline, ncol, nmessage))
    print("ok: %d:%d-%d %s (%d note%s)" % (line, col, col + width, message, len(want),
                                           "" if len(want) == 1 else "s"))

# A change to a correct text clears them; back to the broken one brings
# them back.
got = c.change(uri, 2, open(fixed).read())
check(got["diagnostics"] == [], "diagnostics after the fix: %r" % got["diagnostics"])
got = c.change(uri, 3, text)
check(len(got["diagnostics"]) == len(expected), "diagnostics after the change back: %r" % got)
c.finish()
print("ok")
