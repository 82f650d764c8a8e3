"""Hosts of their own for the chaos tests: network namespaces joined to this one by veth.

Each :class:`Host` is a network namespace (``steadhN-<hex>``) with ``lo`` up and one
veth link to the machine: ``10.200.K.2`` inside, ``10.200.K.1`` on the machine's side
(``K`` a free third octet, so runs side by side do not collide). A process run
through :meth:`Host.command` is in that namespace and in a UTS namespace of its
own whose host name is the namespace's, so a stead worker there names its leases
``steadhN-<hex>:pid:nonce`` like a worker on another machine (and never takes
over a lease of a worker on "its" host by seeing that the holder's pid is gone).

PostgreSQL listens on 127.0.0.1 only, which no namespace can reach; a
:class:`Forwarder` per host listens on ``10.200.K.1:port`` and relays to it,
recording the address every connection came from, so a test can tell which host
really spoke to the store. Taking a host's link down (:meth:`Host.cut`) cuts it
off from the store and from nothing else: it shares the machine's files and
processes. The server's own end of every connection is the forwarder's, which
stays up through a cut: the server cannot notice a host gone (its TCP keepalives
see a live peer), only the host's own end can time out.
"""

from __future__ import annotations

import contextlib
import ipaddress
import random
import secrets
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlencode

from tests.needs import missing

NEED = "make network namespaces"
# run inside ``unshare --uts``: take the host's name, then become the real command
_AS_HOST = (
    "import os, socket, sys; socket.sethostname(sys.argv[1]); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])"
)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


class Forwarder:
    """Relays TCP connections from ``listen`` (any free port) to ``target``, recording
    the address each one came from."""

    def __init__(self, listen: str, target: tuple[str, int]) -> None:
        self.target = target
        self.peers: list[str] = []
        self._server = socket.create_server((listen, 0))
        self._server.settimeout(0.2)
        self.port = int(self._server.getsockname()[1])
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, name=f"fwd-{listen}", daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                inside, peer = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed by stop()
            try:
                outside = socket.create_connection(self.target, timeout=5)
            except OSError:
                inside.close()
                continue
            inside.settimeout(None)
            outside.settimeout(None)
            with self._lock:
                if self._stop.is_set():
                    inside.close()
                    outside.close()
                    return
                self.peers.append(str(peer[0]))
                self._sockets += [inside, outside]
                for a, b in ((inside, outside), (outside, inside)):
                    t = threading.Thread(target=self._pump, args=(a, b), daemon=True)
                    self._threads.append(t)
                    t.start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)  # pass the end on; the other way may go on

    def stop(self) -> None:
        self._stop.set()
        self._server.close()
        self._accepting.join(timeout=5)
        with self._lock:
            for s in self._sockets:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            threads = list(self._threads)
        for t in threads:
            t.join(timeout=5)


@dataclass
class Host:
    """One network namespace standing for a host."""

    number: int
    name: str  # the namespace's name, and the host name its processes see
    veth_out: str  # the link's end on the machine's side
    veth_in: str  # its end inside the namespace
    outside: str  # 10.200.K.1: the machine's address on the link
    inside: str  # 10.200.K.2: the host's own address
    forwarder: Forwarder | None = None
    made: list[str] = field(default_factory=list)

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` (a ``python …`` command line) run on this host."""
        return [
            "ip", "netns", "exec", self.name, "unshare", "--uts",
            sys.executable, "-c", _AS_HOST, self.name, *argv[1:],
        ]  # fmt: skip

    def store_url(self, user: str, dbname: str, **params: str) -> str:
        """A ``postgresql://`` URL reaching the store through this host's forwarder."""
        assert self.forwarder is not None
        query = urlencode(params) if params else ""
        return f"postgresql://{user}@{self.outside}:{self.forwarder.port}/{dbname}" + (
            f"?{query}" if query else ""
        )

    def cut(self) -> None:
        """Take the host's link down: nothing it sends reaches the machine, nor back."""
        _ip("link", "set", self.veth_out, "down")

    def restore(self) -> None:
        _ip("link", "set", self.veth_out, "up")

    def peers(self) -> set[str]:
        """Every address a connection to the store through this host's forwarder came from."""
        assert self.forwarder is not None
        return set(self.forwarder.peers)


def _free_octets(count: int) -> list[int]:
    used: set[int] = set()
    for line in _ip("-4", "-o", "addr", "show").stdout.splitlines():
        for word in line.split():
            with contextlib.suppress(ValueError):
                net = ipaddress.ip_interface(word).network
                if net.overlaps(ipaddress.ip_network("10.200.0.0/16")):
                    used.add(int(str(net.network_address).split(".")[2]))
    free = [k for k in range(1, 255) if k not in used]
    if len(free) < count:
        raise RuntimeError("no free 10.200.K.0/24 subnets left on this machine")
    return random.sample(free, count)


def _make(host: Host) -> None:
    _ip("netns", "add", host.name)
    host.made.append("netns")
    _ip("link", "add", host.veth_out, "type", "veth", "peer", "name", host.veth_in)
    host.made.append("veth")
    _ip("link", "set", host.veth_in, "netns", host.name)
    _ip("addr", "add", f"{host.outside}/24", "dev", host.veth_out)
    _ip("link", "set", host.veth_out, "up")
    inside = ("-n", host.name)
    _ip(*inside, "link", "set", "lo", "up")
    _ip(*inside, "addr", "add", f"{host.inside}/24", "dev", host.veth_in)
    _ip(*inside, "link", "set", host.veth_in, "up")


def _unmake(host: Host) -> None:
    if host.forwarder is not None:
        host.forwarder.stop()
    if "veth" in host.made:  # gone with the namespace if it was moved in; its peer too
        _ip("link", "del", host.veth_out, check=False)
    if "netns" in host.made:
        _ip("netns", "del", host.name, check=False)


@contextlib.contextmanager
def hosts(count: int, target: tuple[str, int]) -> Iterator[list[Host]]:
    """``count`` hosts, each with a forwarder to ``target``; all removed afterwards
    (the caller ends the processes it ran in them first)."""
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        missing(
            "cannot make network namespaces here: no `ip` or `unshare`", "make network namespaces"
        )
    run = secrets.token_hex(3)
    probe = f"steadp-{run}"
    tried = _ip("netns", "add", probe, check=False)
    if tried.returncode != 0:
        missing(
            f"cannot make network namespaces here: {tried.stderr.strip()}",
            NEED,
        )
    _ip("netns", "del", probe, check=False)
    made: list[Host] = []
    try:
        for n, k in enumerate(_free_octets(count), start=1):
            host = Host(
                number=n,
                name=f"steadh{n}-{run}",
                veth_out=f"sv{run}{n}o",
                veth_in=f"sv{run}{n}i",
                outside=f"10.200.{k}.1",
                inside=f"10.200.{k}.2",
            )
            made.append(host)
            _make(host)
            host.forwarder = Forwarder(host.outside, target)
        yield made
    finally:
        for host in made:
            _unmake(host)
