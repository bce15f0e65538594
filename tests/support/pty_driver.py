"""Runs a program on a pseudo-terminal and follows a script of steps, as a person at a
terminal would: wait for text (bounded), type a line, press Ctrl-C or Ctrl-D.

Usage: pty_driver.py SCRIPT.json. The script: {"argv": [...], "env": {...},
"steps": [{"expect": TEXT, "timeout": S} | {"send": TEXT} | {"key": "ctrl-c"|"ctrl-d"}],
"exit_timeout": S}. Prints one JSON object: the whole transcript, the exit code, the
first failure (a step whose text did not come in time) or null, and whether the terminal
shows what is typed once the program has ended.
"""

import json
import os
import pty
import select
import signal
import struct
import sys
import termios
import fcntl
import time

CURSOR_QUERY = b"\x1b[6n"
KEYS = {"ctrl-c": b"\x03", "ctrl-d": b"\x04"}


def main():
    with open(sys.argv[1]) as f:
        script = json.load(f)
    pid, master = pty.fork()
    if pid == 0:
        env = dict(os.environ)
        env.update(script.get("env", {}))
        env["TERM"] = "xterm"
        os.execvpe(script["argv"][0], script["argv"], env)
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    transcript = bytearray()
    seen = 0  # where the next expect starts looking
    failure = None
    closed = False

    def pump(timeout):
        """Reads what is there within `timeout`; answers cursor queries as a terminal does."""
        nonlocal closed
        if closed:
            return
        ready, _, _ = select.select([master], [], [], timeout)
        if not ready:
            return
        try:
            data = os.read(master, 65536)
        except OSError:
            closed = True
            return
        if not data:
            closed = True
            return
        for _ in range(data.count(CURSOR_QUERY)):
            os.write(master, b"\x1b[1;1R")
        transcript.extend(data)

    for step in script["steps"]:
        if "expect" in step:
            want = step["expect"].encode()
            deadline = time.monotonic() + step.get("timeout", 30)
            while True:
                at = transcript.find(want, seen)
                if at >= 0:
                    seen = at + len(want)
                    break
                left = deadline - time.monotonic()
                if left <= 0 or closed:
                    failure = "did not see %r in time" % step["expect"]
                    break
                pump(min(left, 0.5))
            if failure:
                break
        elif "send" in step:
            os.write(master, step["send"].encode())
        elif "key" in step:
            os.write(master, KEYS[step["key"]])
        pump(0)

    code = None
    deadline = time.monotonic() + script.get("exit_timeout", 30)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            failure = failure or "the program did not exit in time"
            break
        pump(0.2)
    drain_until = time.monotonic() + 2
    while not closed and time.monotonic() < drain_until:
        pump(0.2)
    # The terminal's settings as the program left them (Linux answers for the other end).
    echo = bool(termios.tcgetattr(master)[3] & termios.ECHO)
    print(json.dumps({
        "transcript": transcript.decode("utf-8", "replace"),
        "code": code,
        "failure": failure,
        "echo": echo,
    }))


if __name__ == "__main__":
    main()
