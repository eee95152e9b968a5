"""primec lsp on a file that uses composite operators (examples/opt_blocks.prime).

usage: composite.py PRIMEC STDLIB_DIR EXAMPLE
Its diagnostics are empty; go-to-definition of a composite at its use
leads to its declaration in stdlib/blocks.prime, and of a tensor inside a
composite's body to the part it names; hover on a composite's use shows
each part; completion after `use` on it lists the partitions every part
has; hover on the composite's name answers (the server keeps answering).
"""
import os
import re
import sys

from lsp_client import Client, check, path_uri, position_of

primec, stdlib, path = sys.argv[1:4]
text = open(path).read()
uri = path_uri(path)
blocks = os.path.join(stdlib, "blocks.prime")
blocks_text = open(blocks).read()


def blocks_position(pattern):
    m = re.search(pattern, blocks_text, re.M)
    check(m is not None, "%r not in blocks.prime" % pattern)
    off = m.start(1)
    return blocks_text.count("\n", 0, off), off - (blocks_text.rfind("\n", 0, off) + 1)


c = Client(primec)
c.initialize()
diags = c.open(uri, text)["diagnostics"]
check(diags == [], "diagnostics of %s: %r" % (path, diags))
print("ok: no diagnostics")

for name, needle in (("layernorm", "ln1 = layernorm(x"), ("attention", "attn = attention(ln1"),
                     ("mlp_relu", "mlp = mlp_relu(ln2")):
    line, char = position_of(text, needle, needle.index(name) + 1)
    r = c.at("textDocument/definition", uri, line, char)["result"]
    want = blocks_position(r"^op (%s)\(" % name)
    check(r is not None and r["uri"] == path_uri(blocks) and
          (r["range"]["start"]["line"], r["range"]["start"]["character"]) == want,
          "definition of %s: %r, expected blocks.prime:%d:%d" % (name, r, want[0] + 1, want[1] + 1))
    print("ok: definition of %s -> blocks.prime:%d" % (name, want[0] + 1))

# Hover on a use: a section for each part (the layer's first copy).
for needle, parts in (("ln1 = layernorm", ["ln1_mean_0", "ln1_var_0", "ln1_n_0", "ln1_0"]),
                      ("mlp = mlp_relu", ["mlp_hidden_0", "mlp_act_0", "mlp_out_0", "mlp_0"])):
    line, char = position_of(text, needle, 1)
    r = c.at("textDocument/hover", uri, line, char)["result"]
    check(r is not None, "hover at %r: none" % needle)
    value = r["contents"]["value"]
    for part in parts:
        check("**%s** = " % part in value, "hover at %r lacks part %s: %s" % (needle, part, value))
    check(value.count("**%s" % needle.split()[0]) == len(parts),
          "hover at %r: %d sections, expected %d" % (needle, value.count("**"), len(parts)))
    print("ok: hover at %r shows its %d parts" % (needle, len(parts)))
# Hover on an argument of a use: an answer or none, never a crash.
line, char = position_of(text, "attention(ln1", 11)
c.at("textDocument/hover", uri, line, char)
print("ok: hover on a use's argument answered")

# Completion after `use` on a composite's use: the partitions every part's
# operator has (the layernorm's parts all have rows and replicate).
changed = text.replace("ln1 = layernorm(x, g1, b1);", "ln1 = layernorm(x, g1, b1) use ;")
c.change(uri, 2, changed)
line, char = position_of(changed, "layernorm(x, g1, b1) use ;", 25)
r = c.at("textDocument/completion", uri, line, char)["result"]
labels = [i["label"] for i in r]
check("rows" in labels and "replicate" in labels, "completion on a composite's use: %r" % labels)
check(all(i["detail"] == "partition of every part of layernorm" for i in r),
      "completion details: %r" % r)
print("ok: completion on a composite's use: %s" % ", ".join(labels))
c.change(uri, 3, text)

# The stdlib file itself: a composite's input used by a part.
buri = path_uri(blocks)
c.open(buri, blocks_text)
line, char = position_of(blocks_text, "norm_var(x, mean)", 12)
r = c.at("textDocument/definition", buri, line, char)["result"]
want = position_of(blocks_text, "    mean = norm_mean", 4)
check(r is not None and (r["range"]["start"]["line"], r["range"]["start"]["character"]) == want,
      "definition of a part in a composite: %r, expected %r" % (r, want))
print("ok: definition of a part inside a composite's body")
line, char = position_of(blocks_text, "op layernorm", 4)
c.at("textDocument/hover", buri, line, char)
print("ok: hover on a composite's name answered")
c.finish()
print("ok")
