#!/usr/bin/env python3
"""progress_tty.py TEXT DIR CMD ARGS...

The progress line of long work (runtime/prime_progress.h): CMD run with
stdout on a file writes nothing of a progress line there (no carriage
return, no TEXT); run under a terminal (a pty), TEXT appears in the
progress line and the line is erased at the end. PRIME_PROGRESS_AFTER=0
makes the line show from the first update. A run that fails is tried
again, up to three times (a quick calibration can fail its fit on a
loaded machine; the progress line is what is tested). Prints PASS or FAIL
with the reason last.
"""
import os
import pty
import subprocess
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run_on_pty(cmd, env):
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(cmd[0], cmd, env)
    got = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        got += chunk
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    return got, os.waitstatus_to_exitcode(status)


def main():
    text, work, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, PRIME_PROGRESS_AFTER="0")
    out = os.path.join(work, "stdout.txt")
    for _ in range(3):
        with open(out, "w") as f:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.DEVNULL, env=env).returncode
        if rc == 0:
            break
    if rc != 0:
        fail("%s exited %d" % (" ".join(cmd), rc))
    data = open(out).read()
    if "\r" in data or text in data:
        fail("a progress line went to a file: %r" % data[:200])

    for _ in range(3):
        got, rc = run_on_pty(cmd, env)
        if rc == 0:
            break
    if rc != 0:
        fail("%s under a terminal failed" % " ".join(cmd))
    shown = got.decode(errors="replace")
    if "\r" + text not in shown:
        fail("no progress line '%s' on a terminal: %r" % (text, shown[:300]))
    if "\r\x1b[K" not in shown:
        fail("the progress line was not erased")
    print("PASS")


if __name__ == "__main__":
    main()
