"""The seccomp filter every sandboxed process runs under.

Namespaces decide what a command can see; this decides which of the
kernel's doors to other processes, and to rarely needed kernel machinery,
it may use at all. A command can never trace a process (``ptrace``), read
or write another's memory (``process_vm_readv``/``writev``), take another's
file descriptors or signal it by handle (the ``pidfd_*`` calls), or reach
``io_uring``, the kernel keyring, ``bpf``, ``userfaultfd``,
``perf_event_open``, module loading or ``kexec``: the first group is how a
command would take over a process it did not start, the second is kernel
surface that sandboxed tools have no use for and that has carried many of
the kernel's own escapes.

Calls with a fallback that programs use when the kernel lacks them
(``io_uring``, ``pidfd_open``) fail with ``ENOSYS``, as on an older
kernel, so a program takes its fallback; the rest fail with ``EPERM``. A
call made through another architecture's entry point (32-bit calls from a
64-bit process, x32) fails with ``ENOSYS`` whatever it is, since the
numbers below are the native ones.

The filter is classic BPF, built here without libseccomp, and handed to
bubblewrap on a pipe (``--seccomp FD``), which applies it with
``PR_SET_NO_NEW_PRIVS`` right before it starts the sandbox's first process;
every process inside inherits it and none can remove it.
"""

from __future__ import annotations

import errno
import os
import platform
import struct
from functools import cache

_EPERM_CALLS = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
)
_ENOSYS_CALLS = (
    "pidfd_open",
    "pidfd_getfd",
    "pidfd_send_signal",
    "process_madvise",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
)

# numbers that every architecture shares (the kernel's unified table since 5.1)
_COMMON = {
    "pidfd_send_signal": 424,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "pidfd_open": 434,
    "pidfd_getfd": 438,
    "process_madvise": 440,
}
_X86_64 = {
    "ptrace": 101,
    "init_module": 175,
    "delete_module": 176,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "perf_event_open": 298,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
}
_AARCH64 = {
    "kexec_load": 104,
    "init_module": 105,
    "delete_module": 106,
    "ptrace": 117,
    "add_key": 217,
    "request_key": 218,
    "keyctl": 219,
    "perf_event_open": 241,
    "process_vm_readv": 270,
    "process_vm_writev": 271,
    "kcmp": 272,
    "finit_module": 273,
    "bpf": 280,
    "userfaultfd": 282,
    "kexec_file_load": 294,
}
# (AUDIT_ARCH_* value, numbers, first number of a foreign ABI sharing the arch value)
_ARCHES = {
    "x86_64": (0xC000003E, _X86_64, 0x40000000),  # x32 calls carry bit 30
    "aarch64": (0xC00000B7, _AARCH64, None),
}

_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_NR, _ARCH = 0, 4  # offsets in struct seccomp_data

DENIED = _EPERM_CALLS + _ENOSYS_CALLS
"""Every call the filter refuses, by name."""


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


@cache
def program(machine: str | None = None) -> bytes | None:
    """The compiled filter for ``machine`` (this one's by default): an array
    of ``struct sock_filter``, or ``None`` on an architecture it does not know."""
    found = _ARCHES.get(machine or platform.machine())
    if found is None:
        return None
    arch, numbers, foreign = found
    table = {**_COMMON, **numbers}
    out = [
        _insn(_LD_W_ABS, _ARCH),
        _insn(_JEQ_K, arch, jt=1),
        _insn(_RET_K, _ERRNO | errno.ENOSYS),
        _insn(_LD_W_ABS, _NR),
    ]
    if foreign is not None:
        out += [_insn(_JGE_K, foreign, jf=1), _insn(_RET_K, _ERRNO | errno.ENOSYS)]
    for name in DENIED:
        code = errno.EPERM if name in _EPERM_CALLS else errno.ENOSYS
        out += [_insn(_JEQ_K, table[name], jf=1), _insn(_RET_K, _ERRNO | code)]
    out.append(_insn(_RET_K, _ALLOW))
    return b"".join(out)


def filter_fd() -> int | None:
    """A pipe's read end holding the filter, for bubblewrap's ``--seccomp``;
    the caller passes it to bubblewrap and closes it after the start.
    ``None`` where there is no filter for this architecture."""
    code = program()
    if code is None:
        return None
    read, write = os.pipe()
    try:
        os.write(write, code)  # a few hundred bytes: far below a pipe's buffer
    finally:
        os.close(write)
    return read
