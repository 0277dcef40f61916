"""A TCP proxy on loopback in front of a Redis port, with the faults of a real network.

Like a load balancer, it accepts every connection and then connects to Redis; when Redis
is down (restarting) it *resets* the new connection instead of refusing it. On top:
``reset_all()`` resets every open connection, ``reset_new(seconds)`` resets new ones for a
while, and ``blackhole(seconds)`` makes every connection half-open: bytes are swallowed
without an answer, as when a peer vanished without a FIN; the connections open during a
blackhole are dropped when it ends (their peer is gone), later ones work again.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
import time

from pyspark_ick.testing import free_port

LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends an RST


def reset(sock: socket.socket) -> None:
    """Close ``sock`` with an RST (the peer reads ECONNRESET), never raising."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RESET)
    with contextlib.suppress(OSError):
        sock.close()


class FaultProxy:
    """Listens on 127.0.0.1:``port`` (a free one by default) and forwards to
    127.0.0.1:``target_port``."""

    def __init__(self, target_port: int, port: int | None = None) -> None:
        self.target_port = target_port
        self.port = port or free_port()
        self._listener = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._reset_until = 0.0
        self._hole_until = 0.0
        self._holed: list[tuple[socket.socket, socket.socket]] = []
        self._closed = threading.Event()
        self.accepted = self.resets = 0
        threading.Thread(target=self._accept, daemon=True, name="fault-proxy-accept").start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    # --- faults ------------------------------------------------------------------------

    def reset_all(self) -> int:
        """Reset every open connection (both ends); returns how many."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for client, upstream in pairs:
            reset(client)
            reset(upstream)
        self.resets += len(pairs)
        return len(pairs)

    def reset_new(self, seconds: float) -> None:
        """Reset every connection accepted in the next ``seconds`` (a restarting server
        behind a load balancer)."""
        self._reset_until = time.monotonic() + seconds

    def blackhole(self, seconds: float) -> None:
        """Swallow every byte in both directions for ``seconds``, then drop the
        connections that were open meanwhile (half-open: no FIN, no RST until then)."""
        self._hole_until = time.monotonic() + seconds
        with self._lock:
            self._holed = list(self._pairs)
        threading.Timer(seconds, self._end_hole).start()

    def heal(self) -> None:
        """End every fault now."""
        self._reset_until = 0.0
        self._end_hole()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        self.reset_all()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing ----------------------------------------------------------------------

    def _end_hole(self) -> None:
        self._hole_until = 0.0
        with self._lock:
            holed, self._holed = self._holed, []
            self._pairs = [p for p in self._pairs if p not in holed]
        for client, upstream in holed:
            reset(client)
            reset(upstream)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(
                target=self._serve, args=(client,), daemon=True, name="fault-proxy-pump"
            ).start()

    def _serve(self, client: socket.socket) -> None:
        if time.monotonic() < self._reset_until:
            self.resets += 1
            reset(client)
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
        except OSError:  # Redis down: a load balancer resets, it does not refuse
            self.resets += 1
            reset(client)
            return
        pair = (client, upstream)
        with self._lock:
            self._pairs.append(pair)
            if time.monotonic() < self._hole_until:
                self._holed.append(pair)
        self._pump(pair)

    def _pump(self, pair: tuple[socket.socket, socket.socket]) -> None:
        client, upstream = pair
        other = {client: upstream, upstream: client}
        with selectors.DefaultSelector() as sel:
            try:
                for sock in pair:
                    sock.setblocking(False)
                    sel.register(sock, selectors.EVENT_READ)
                while not self._closed.is_set():
                    for key, _ in sel.select(timeout=0.2):
                        sock = key.fileobj
                        assert isinstance(sock, socket.socket)
                        data = sock.recv(65536)
                        if not data:
                            raise ConnectionResetError
                        if time.monotonic() < self._hole_until:
                            continue  # swallowed: the peer waits for an answer
                        other[sock].setblocking(True)
                        other[sock].sendall(data)
                        other[sock].setblocking(False)
            except (OSError, ValueError):
                pass
        with self._lock:
            if pair in self._pairs:
                self._pairs.remove(pair)
        for sock in pair:
            reset(sock)
