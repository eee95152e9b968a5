"""primec lsp: go-to-definition of operators, partitions and tensors.

usage: definition.py PRIMEC STDLIB_DIR
Uses cannon.prime next to this script: an operator of the stdlib, a
partition of the file and of the stdlib, tensors of the model.
"""
import os
import re
import sys

from lsp_client import Client, check, path_uri, position_of

primec, stdlib = sys.argv[1:3]
here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "cannon.prime")
text = open(path).read()
uri = path_uri(path)


def stdlib_position(pattern):
    """The file, line and column of group 1 of `pattern` in the stdlib."""
    for name in sorted(os.listdir(stdlib)):
        src = open(os.path.join(stdlib, name)).read()
        m = re.search(pattern, src, re.M)
        if m:
            off = m.start(1)
            return (path_uri(os.path.join(stdlib, name)), src.count("\n", 0, off),
                    off - (src.rfind("\n", 0, off) + 1))
    raise SystemExit("FAIL: %r not in the stdlib" % pattern)


def doc_position(needle, skip):
    line, char = position_of(text, needle, skip)
    return uri, line, char


c = Client(primec)
c.initialize()
c.open(uri, text)
cases = [
    # (what, where the cursor is: needle, offset into it; where it leads; length)
    ("operator in a call", ("y = matmul(", 6), stdlib_position(r"^op (matmul)\("), 6),
    ("operator after 'of'", ("of matmul", 5), stdlib_position(r"^op (matmul)\("), 6),
    ("partition of the file", ("use cannon", 4), doc_position("partition cannon", 10), 6),
    ("tensor argument (input)", ("matmul(x,", 7), doc_position("input x", 6), 1),
    ("tensor argument (weight)", ("(y, v)", 4), doc_position("weight v", 7), 1),
    ("tensor argument (instance result)", ("(y, v)", 1), doc_position("    y = ", 4), 1),
    ("size parameter", ("input x[m", 8), doc_position("param m", 6), 1),
    ("operator input in its body", ("= X[m, n] +", 2), doc_position("twice(X", 6), 1),
    ("operator result in its body", ("{ Y[m", 2), doc_position("-> Y[", 3), 1),
    ("dimension in an operator's body", ("+ X[m, n]", 7), doc_position("twice(X[m, n]", 11), 1),
]
for what, (needle, skip), (want_uri, want_line, want_char), length in cases:
    line, char = position_of(text, needle, skip)
    r = c.at("textDocument/definition", uri, line, char)["result"]
    check(r is not None, "%s: no definition" % what)
    check(r["uri"] == want_uri, "%s: uri %s, expected %s" % (what, r["uri"], want_uri))
    check(r["range"] == {"start": {"line": want_line, "character": want_char},
                         "end": {"line": want_line, "character": want_char + length}},
          "%s: range %r, expected line %d character %d" % (what, r["range"], want_line, want_char))
    print("ok: %s -> %s:%d:%d" % (what, os.path.basename(r["uri"]), want_line + 1, want_char + 1))

# The stdlib's own partition, in a changed text.
changed = text.replace("z = matmul(y, v) use cannon", "z = matmul(y, v) use square")
c.change(uri, 2, changed)
line, char = position_of(changed, "use square", 5)
r = c.at("textDocument/definition", uri, line, char)["result"]
want = stdlib_position(r"^partition (square) of matmul")
check(r and (r["uri"], r["range"]["start"]["line"], r["range"]["start"]["character"]) == want,
      "partition of the stdlib: %r, expected %r" % (r, want))
print("ok: partition of the stdlib -> %s:%d" % (os.path.basename(r["uri"]), want[1] + 1))
# A comment has no definition.
check(c.at("textDocument/definition", uri, 0, 3)["result"] is None, "definition in a comment")
c.finish()
print("ok")
