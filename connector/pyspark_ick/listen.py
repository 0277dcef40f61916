"""Where the CLI's servers (the console, the metrics exporter) listen: whether an address
is loopback, the address as a URL shows it, and a failure to listen said in one line."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import socket

from .errors import IckConfigError

MAX_PORT = 65535


def port_arg(value: str) -> int:
    """An argparse type: a TCP port, 1 to 65535."""
    if not value.isdigit() or not 1 <= int(value) <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"expected a port from 1 to {MAX_PORT}, got {value!r}")
    return int(value)


def loopback(address: str) -> bool:
    """Whether ``address`` reaches only this machine: 127.0.0.0/8, ``::1``, ``localhost``."""
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address.lower() == "localhost"


def host_port(address: str, port: int) -> str:
    """``address:port`` as a URL writes it: an IPv6 address in brackets (``[::1]:8642``)."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def listen_failed(exc: Exception, address: str, port: int, command: str) -> IckConfigError:
    """The one-line error of ``pyspark-ick COMMAND`` failing to listen on ``address:port``
    (``exc``: what binding raised), saying which option to change: an IckConfigError, as
    the fault is in ``--port`` or ``--bind``, not in Redis."""
    at = host_port(address, port)
    code = getattr(exc, "errno", None)
    if code == errno.EADDRINUSE:
        why = f"port {port} is in use (another program holds it): pick another --port"
    elif code == errno.EACCES:
        why = (
            f"permission denied: a port below 1024 needs root (or CAP_NET_BIND_SERVICE): "
            f"pick a --port from 1024 to {MAX_PORT}"
        )
    elif isinstance(exc, socket.gaierror | ValueError) or code == errno.EADDRNOTAVAIL:
        why = (
            f"--bind {address!r} is no address of this machine: give one of its addresses "
            "(127.0.0.1, the default; 0.0.0.0 for every interface)"
        )
    else:
        why = f"{getattr(exc, 'strerror', None) or exc}"
    return IckConfigError(f"{command}: cannot listen on {at}: {why}")
