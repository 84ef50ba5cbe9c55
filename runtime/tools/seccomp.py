"""A seccomp filter (classic BPF, as bwrap's `--seccomp FD` reads it) that keeps a sandboxed
command from opening unix sockets: a read-only bind does not stop `connect()` to a socket
file (a host Redis, docker.sock), and abstract sockets are reachable whenever the network
namespace is the host's. Everything else is allowed.

Denied: socket(AF_UNIX, ...) (EAFNOSUPPORT: nscd and syslog clients fall back quietly;
socketpair stays, it reaches nothing outside), io_uring (its IORING_OP_SOCKET would bypass
the check; ENOSYS, so programs fall back to plain syscalls), the x32 ABI on x86_64 (the same
calls under other numbers), and any other architecture a process may switch to (i386 and
arm32 compat: killed)."""

from __future__ import annotations

import errno
import platform
import struct
from typing import NamedTuple

# linux/filter.h, linux/seccomp.h, linux/audit.h
_LD_ABS_W = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_KILL_PROCESS = 0x80000000
_ERRNO = 0x00050000
# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (little-endian)
_NR, _ARCH, _ARG0 = 0, 4, 16
_AF_UNIX = 1
_X32_BIT = 0x40000000


class _Arch(NamedTuple):
    audit: int  # AUDIT_ARCH_*
    socket: int  # __NR_socket
    x32: bool  # another ABI under the same audit arch, told apart by a bit of nr


# io_uring_setup, _enter, _register share numbers 425-427 on both.
_IO_URING = (425, 426, 427)
ARCHES = {
    "x86_64": _Arch(0xC000003E, 41, x32=True),
    "aarch64": _Arch(0xC00000B7, 198, x32=False),
}


class SeccompUnsupported(RuntimeError):
    """No filter for this machine's architecture: unix sockets cannot be closed here."""


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def no_unix_sockets(machine: str | None = None) -> bytes:
    """The filter program for `machine` (default: this one's), as bytes of sock_filter."""
    name = machine or platform.machine()
    arch = ARCHES.get(name)
    if arch is None:
        raise SeccompUnsupported(f"no seccomp filter for the {name} architecture")
    deny_socket = _op(_RET, _ERRNO | errno.EAFNOSUPPORT)
    no_uring = _op(_RET, _ERRNO | errno.ENOSYS)
    tail = [
        _op(_LD_ABS_W, _ARG0),  # socket's domain (low 32 bits)
        _op(_JEQ, _AF_UNIX, jt=0, jf=1),
        deny_socket,
        _op(_RET, _ALLOW),
    ]
    # socket() jumps over the io_uring checks, the allow and `no_uring`, to the tail.
    checks = [_op(_JEQ, arch.socket, jt=len(_IO_URING) + 2, jf=0)]
    for index, number in enumerate(_IO_URING):
        # To `no_uring`, past the remaining io_uring checks and the allow.
        checks.append(_op(_JEQ, number, jt=len(_IO_URING) - index, jf=0))
    checks += [_op(_RET, _ALLOW), no_uring]
    head = [_op(_LD_ABS_W, _ARCH), _op(_JEQ, arch.audit, jt=1, jf=0), _op(_RET, _KILL_PROCESS)]
    head.append(_op(_LD_ABS_W, _NR))
    if arch.x32:
        head += [_op(_JGE, _X32_BIT, jt=0, jf=1), _op(_RET, _ERRNO | errno.ENOSYS)]
    return b"".join([*head, *checks, *tail])
