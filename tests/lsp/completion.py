"""primec lsp: completion after `use` lists the partitions of the operator
the statement calls, those of the stdlib (found here by reading
stdlib/*.prime) and of the file.

usage: completion.py PRIMEC STDLIB_DIR
"""
import os
import re
import sys

from lsp_client import Client, check, path_uri

primec, stdlib = sys.argv[1:3]
here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "cannon.prime")
text = open(path).read()
uri = path_uri(path)


def named_in(text, op):
    """Partitions `partition NAME of A, B, ... on` whose list names op."""
    names = set()
    for m in re.finditer(r"^partition (\w+) of\s+([\w,\s]+?)\s+on\b", text, re.M):
        if op in [o.strip() for o in m.group(2).split(",")]:
            names.add(m.group(1))
    return names


def partitions_of(op, extra=""):
    names = set()
    for name in sorted(os.listdir(stdlib)):
        if name.endswith(".prime"):
            names |= named_in(open(os.path.join(stdlib, name)).read(), op)
    return names | named_in(extra, op)


c = Client(primec)
c.initialize()
c.open(uri, text)
for op, typed in [("matmul", ""), ("matmul", "ca"), ("gelu", ""), ("add", "r")]:
    # The statement being written: `q = OP(...) use TYPED|`, unfinished.
    args = "y, v" if op == "matmul" else "y" if op == "gelu" else "y, y"
    line_text = "    q = %s(%s) use %s" % (op, args, typed)
    edited = text.replace("    z = matmul(y, v) use cannon;\n", line_text + "\n")
    c.change(uri, 2, edited)
    line = edited.splitlines().index(line_text)
    r = c.at("textDocument/completion", uri, line, len(line_text))["result"]
    labels = set(item["label"] for item in r)
    want = partitions_of(op, text)
    check(labels == want, "completion for %s: %s, the partitions of %s are %s"
          % (op, sorted(labels), op, sorted(want)))
    for item in r:
        check(item["detail"].startswith("partition of %s on mesh(" % op), "detail %r" % item)
    print("ok: use ... of %s: %d partitions (%s)" % (op, len(labels), ", ".join(sorted(labels))))
# Not after `use`: nothing.
c.change(uri, 3, text)
r = c.at("textDocument/completion", uri, 10, 4)["result"]
check(r == [], "completion outside `use`: %r" % r)
c.finish()
print("ok")
