"""primec lsp: an internal compiler error in any pass does not end the
server. The fault is injected with PRIMEC_FAULT=ice:PASS (an internal
error as PASS begins); the server reports it as a diagnostic on the
document, keeps what the passes before PASS found (hover, definition),
and answers shutdown and exit as usual.

usage: ice.py PRIMEC
"""
import os
import sys

from lsp_client import Client, check, path_uri, position_of

primec = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "cannon.prime")
text = open(path).read()
uri = path_uri(path)
# The instance `y` of model two (a hover target once resolve has run) and
# the partition `cannon` at its use (a definition target).
y_pos = position_of(text, "y = matmul")
use_pos = position_of(text, "use cannon", 4)
decl_line = position_of(text, "partition cannon")[0]

for pass_name in ["parse", "resolve", "partition", "phases", "schedule"]:
    env = dict(os.environ, PRIMEC_FAULT="ice:" + pass_name)
    c = Client(primec, env=env)
    c.initialize()
    diags = c.open(uri, text)["diagnostics"]
    ice = [d for d in diags if "internal compiler error in pass '%s'" % pass_name in d["message"]]
    check(len(ice) == 1, "%s: one internal-error diagnostic expected, got %r" % (pass_name, diags))
    check(ice[0]["severity"] == 1, "%s: the internal error is not an error: %r" % (pass_name, ice))
    check("fault injected" in ice[0]["message"], "%s: message %r" % (pass_name, ice[0]["message"]))
    check(len(diags) == 1, "%s: other diagnostics besides the internal error: %r"
          % (pass_name, diags))
    # Still serving, on the same document and on a change of it.
    hover = c.at("textDocument/hover", uri, *y_pos)
    check("result" in hover, "%s: hover: %r" % (pass_name, hover))
    definition = c.at("textDocument/definition", uri, *use_pos)
    check("result" in definition, "%s: definition: %r" % (pass_name, definition))
    if pass_name != "parse":
        # Resolve ran (or was the pass before the failure): the partition's
        # declaration is found.
        result = definition["result"]
        loc = result[0] if isinstance(result, list) else result
        check(loc is not None and loc["range"]["start"]["line"] == decl_line,
              "%s: definition of cannon: %r" % (pass_name, definition))
    again = c.change(uri, 2, text + "\n")["diagnostics"]
    check(len(again) == 1 and "internal compiler error" in again[0]["message"],
          "%s: after a change: %r" % (pass_name, again))
    c.finish()
    print("ok: internal error in %s reported, server kept serving" % pass_name)

# Without the fault the same document has no diagnostic at all.
c = Client(primec)
c.initialize()
clean = c.open(uri, text)["diagnostics"]
check(clean == [], "without a fault: %r" % clean)
c.finish()
print("ok: no fault, no diagnostic")
