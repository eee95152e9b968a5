"""primec lsp: input that is not JSON-RPC gets an error response and the
server keeps serving; `exit` without `shutdown` exits 1, end of input
exits 0.

usage: errors.py PRIMEC
"""
import json
import os
import subprocess
import sys

from lsp_client import TIMEOUT_S, Client, check, path_uri, position_of

primec = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "cannon.prime")


def expect_error(c, code, what, rid=None):
    r = c.read()
    check("error" in r and r["error"]["code"] == code and r.get("id") == rid,
          "%s: expected error %d with id %r, got %r" % (what, code, rid, r))
    print("ok: %s -> %d %s" % (what, code, r["error"]["message"]))


def framed(body):
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


c = Client(primec)
# Before initialize, a request is refused.
c.send({"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover", "params": {}})
expect_error(c, -32002, "request before initialize", 1)
c.initialize()

c.send_raw(b"this is not a header\r\n\r\n")
expect_error(c, -32700, "malformed header")
c.send_raw(b"Content-Length: lots\r\n\r\n")
expect_error(c, -32700, "Content-Length not a number")
c.send_raw(b"Content-Type: application/json\r\n\r\n")
expect_error(c, -32700, "no Content-Length")
c.send_raw(framed(b"{not json"))
expect_error(c, -32700, "body not JSON")
c.send_raw(framed(b"\xff\xfe\x00garbage"))
expect_error(c, -32700, "body not UTF-8")
c.send_raw(framed(b"[1, 2, 3]"))
expect_error(c, -32600, "a JSON array")
c.send_raw(framed(b"42"))
expect_error(c, -32600, "a JSON number")
c.send({"id": 7, "method": "initialize"})
expect_error(c, -32600, "no jsonrpc member", 7)
c.send({"jsonrpc": "1.0", "id": 8, "method": "shutdown"})
expect_error(c, -32600, "jsonrpc 1.0", 8)
c.send({"jsonrpc": "2.0", "id": 9})
expect_error(c, -32600, "no method", 9)
c.send({"jsonrpc": "2.0", "id": 10, "method": 12})
expect_error(c, -32600, "method not a string", 10)
c.send({"jsonrpc": "2.0", "id": 11, "method": "textDocument/hover", "params": 5})
expect_error(c, -32600, "params not structured", 11)
c.send({"jsonrpc": "2.0", "id": {"n": 1}, "method": "shutdown"})
expect_error(c, -32600, "id an object")
c.send({"jsonrpc": "2.0", "id": 1.5, "method": "shutdown"})
expect_error(c, -32600, "id a fraction")
c.send({"jsonrpc": "2.0", "id": 12, "method": "no/such/method", "params": {}})
expect_error(c, -32601, "unknown method", 12)
c.send({"jsonrpc": "2.0", "id": 13, "method": "textDocument/hover", "params": {}})
expect_error(c, -32602, "hover without a position", 13)
c.send({"jsonrpc": "2.0", "id": 14, "method": "textDocument/hover", "params": {
    "textDocument": {"uri": "file:///nowhere.prime"}, "position": {"line": 0, "character": 0}}})
expect_error(c, -32602, "hover on a document not open", 14)
# Unknown notifications and didChange of a document not open: no answer
# (the next request's answer comes first).
c.notify("$/cancelRequest", {"id": 1})
c.notify("textDocument/didChange", {"textDocument": {"uri": "file:///x.prime"},
                                    "contentChanges": [{"text": "model"}]})
c.notify("textDocument/didOpen", {"textDocument": {"uri": 5}})

# Still serving: open, hover, and a document full of garbage bytes.
text = open(path).read()
uri = path_uri(path)
check(c.open(uri, text)["diagnostics"] == [], "diagnostics after the bad input")
line, char = position_of(text, "y = matmul")
r = c.at("textDocument/hover", uri, line, char)
check(r["result"] and "cannon" in r["result"]["contents"]["value"], "hover after the bad input")
junk = "model \u00e9\u0000 { ((((( use use ;;; \U0001F600 }" * 50
d = c.change(uri, 2, junk)["diagnostics"]
check(d and all(x["severity"] == 1 for x in d), "diagnostics of garbage: %r" % d[:2])
for method in ("hover", "definition", "completion"):
    for line, char in [(0, 0), (0, 10), (0, 100000), (5, 5), (1 << 40, 1 << 40)]:
        r = c.at("textDocument/" + method, uri, line, char)
        check("result" in r, "%s at %d:%d on garbage: %r" % (method, line, char, r))
print("ok: %d diagnostics on garbage; hover, definition, completion answer" % len(d))
c.finish()

# exit without shutdown: status 1; the end of the input: status 0.
for script, want in [(framed(json.dumps({"jsonrpc": "2.0", "method": "exit"}).encode()), 1),
                     (b"", 0), (b"Content-Length: 100\r\n\r\n{\"jsonrpc\"", 0)]:
    p = subprocess.run([primec, "lsp"], input=script, capture_output=True, timeout=TIMEOUT_S)
    check(p.returncode == want, "exit status %d for %r, expected %d" % (p.returncode, script, want))
print("ok")
