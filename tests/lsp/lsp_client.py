"""A scripted LSP client for the tests of `primec lsp`.

Starts the server, writes framed JSON-RPC messages (or raw bytes) and
reads framed responses and notifications with a timeout, so that a server
that hangs or dies fails the test instead of blocking it.
"""
import json
import os
import queue
import subprocess
import sys
import threading

TIMEOUT_S = int(os.environ.get("LSP_TIMEOUT_S", "30"))


def path_uri(path):
    return "file://" + os.path.abspath(path)


class Client:
    def __init__(self, primec, env=None):
        self.proc = subprocess.Popen([primec, "lsp"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.messages = queue.Queue()
        self.pending = []  # notifications read while waiting for a response
        self.next_id = 1
        threading.Thread(target=self._reader, daemon=True).start()

    def _reader(self):
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    self.messages.put(None)
                    return
                line = line.rstrip(b"\r\n")
                if not line:
                    break
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if length is None:
                self.messages.put(("bad-framing", line))
                return
            self.messages.put(json.loads(out.read(length)))

    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, msg):
        body = json.dumps(msg).encode()
        self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method, params):
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method, params=None):
        """Sends a request; returns the response with its id (notifications
        that arrive first are kept for read_notification)."""
        rid = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self.read_response(rid)

    def read(self):
        try:
            msg = self.messages.get(timeout=TIMEOUT_S)
        except queue.Empty:
            fail("no message from the server within %d s" % TIMEOUT_S)
        if isinstance(msg, tuple):
            fail("a message without Content-Length from the server: %r" % (msg,))
        if msg is None:
            fail("the server closed its output (exit status %s; stderr: %s)"
                 % (self.proc.poll(), self.proc.stderr.read().decode(errors="replace")))
        return msg

    def read_response(self, rid):
        while True:
            msg = self.read()
            if "method" in msg:
                self.pending.append(msg)
            elif msg.get("id") == rid:
                return msg
            else:
                fail("unexpected message %r while waiting for response %r" % (msg, rid))

    def read_notification(self, method):
        for i, msg in enumerate(self.pending):
            if msg.get("method") == method:
                return self.pending.pop(i)
        while True:
            msg = self.read()
            if msg.get("method") == method:
                return msg
            self.pending.append(msg)

    def initialize(self):
        r = self.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
        caps = r["result"]["capabilities"]
        check(caps["hoverProvider"] and caps["definitionProvider"], "capabilities: %r" % caps)
        self.notify("initialized", {})
        return r

    def open(self, uri, text):
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "prime", "version": 1, "text": text}})
        return self.read_notification("textDocument/publishDiagnostics")["params"]

    def change(self, uri, version, text):
        self.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"text": text}]})
        return self.read_notification("textDocument/publishDiagnostics")["params"]

    def at(self, method, uri, line, character):
        return self.request(method, {"textDocument": {"uri": uri},
                                     "position": {"line": line, "character": character}})

    def finish(self):
        """shutdown, exit: the server must answer and exit with status 0."""
        r = self.request("shutdown")
        check("result" in r and r["result"] is None, "shutdown: %r" % r)
        self.notify("exit", None)
        self.proc.stdin.close()
        try:
            rc = self.proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail("the server did not exit after `exit`")
        check(rc == 0, "exit status %d after shutdown + exit" % rc)


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def check(cond, message):
    if not cond:
        fail(message)


def position_of(text, needle, skip=0):
    """(line, character) of the first character of `needle` (after skipping
    `skip` bytes into the match), 0-based."""
    off = text.index(needle) + skip
    line = text.count("\n", 0, off)
    return line, off - (text.rfind("\n", 0, off) + 1)
