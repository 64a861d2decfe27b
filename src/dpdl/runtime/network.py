"""Which network interface an agent's messages leave through, when the agents run on several
hosts.

gloo announces to the other ranks the address its host name resolves to. On many machines that is
a loopback address (Debian's `/etc/hosts` maps the host name to `127.0.1.1`, containers to
`127.0.0.1`), which no other host can reach: the agents then fail to connect to one another
("Gloo connectFullMesh failed ... remote=[127.0.0.1]"). So, unless `GLOO_SOCKET_IFNAME` is set
already, an agent picks the interface itself: the one named by `--interface`, else the one through
which this host reaches `MASTER_ADDR` (the kernel's route to it). A loopback `MASTER_ADDR` (one
machine, as `dpdl run-local` runs) needs nothing. Under nccl, `NCCL_SOCKET_IFNAME` is set to the
same interface for NCCL's own bootstrap, unless it is set already.

Linux and IPv4 only for the automatic choice (the interfaces' addresses are read with `ioctl`);
elsewhere, name the interface.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import struct

from dpdl.errors import ConfigError

__all__ = ["choose_interface", "interface_address", "route_source"]

log = logging.getLogger(__name__)

_SIOCGIFADDR = 0x8915  # Linux: the IPv4 address of an interface


def interface_address(name: str) -> str | None:
    """The IPv4 address of interface `name`, or None when it has none (or this is not Linux)."""
    import fcntl  # POSIX only: imported here so that the module imports everywhere

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            answer = fcntl.ioctl(
                probe.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15])
            )
        except OSError:
            return None
    return socket.inet_ntoa(answer[20:24])


def route_source(master_addr: str, master_port: int) -> str:
    """The local address this host sends from to reach `master_addr` (no packet is sent: a UDP
    socket is only connected, which asks the kernel for the route)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((master_addr, master_port))
            return str(probe.getsockname()[0])
    except OSError as error:  # no route, or a name that does not resolve
        raise ConfigError(
            f"MASTER_ADDR={master_addr}: this host has no route to it ({error}); give the address "
            "of the first agent's host as the other hosts reach it"
        ) from None


def choose_interface(master_addr: str, master_port: int, interface: str | None) -> str | None:
    """The interface the agent's gloo (and NCCL) sockets should use: `interface` when given
    (checked to exist), else the one holding this host's address on the route to
    `master_addr`, else None (a loopback master, or no interface holds that address: gloo's own
    choice stands). Sets `GLOO_SOCKET_IFNAME` (and `NCCL_SOCKET_IFNAME`) accordingly: `interface`
    overrides a value already set, the automatic choice does not."""
    names = [name for _, name in socket.if_nameindex()]
    if interface is not None:
        if interface not in names:
            raise ConfigError(
                f"--interface {interface}: no such network interface on this host; it has "
                f"{', '.join(names)}"
            )
        chosen: str | None = interface
    elif "GLOO_SOCKET_IFNAME" in os.environ:
        return os.environ["GLOO_SOCKET_IFNAME"]
    else:
        try:
            family, *_, where = socket.getaddrinfo(
                master_addr, master_port, proto=socket.IPPROTO_TCP
            )[0]
        except OSError as error:
            raise ConfigError(f"MASTER_ADDR={master_addr} does not resolve: {error}") from None
        if ipaddress.ip_address(where[0]).is_loopback or family != socket.AF_INET:
            return None  # one machine; or IPv6, whose interface addresses are not read here
        source = route_source(where[0], master_port)
        chosen = next((name for name in names if interface_address(name) == source), None)
        if chosen is None:
            return None
    if interface is not None or "GLOO_SOCKET_IFNAME" not in os.environ:  # --interface wins
        os.environ["GLOO_SOCKET_IFNAME"] = chosen
    os.environ.setdefault("NCCL_SOCKET_IFNAME", f"={chosen}")  # "=": this name exactly
    log.info("agent sockets on interface %s (towards MASTER_ADDR=%s)", chosen, master_addr)
    return chosen
