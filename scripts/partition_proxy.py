"""A loopback TCP proxy in front of one Redis-protocol node, which the fault harness uses to
make network partitions (scripts/faults_sentinel.py --fault partition|partition-replicas).

Every peer of the node connects to the proxy instead (the node announces the proxy's port
with `replica-announce-port`, the sentinels monitor it, clients are sent to it), and the
proxy tells the peers apart by what they send: a connection whose client side has sent
REPLCONF or PSYNC is a replica's link, one that has sent `CLIENT SETNAME sentinel-…` (every
Sentinel names its links so) is a sentinel's, anything else is a client's. `block(kinds)`
cuts the node off from those kinds of peers as a partition does, not as a crash does: bytes
in flight either way are held (as TCP would keep retransmitting them), new connections of
those kinds stall, nothing is closed; `heal()` lets everything through again, and whatever
the peers did meanwhile (a sentinel that gave up and closed, a replica that moved on)
reaches the node then. Only loopback addresses.
"""

import socket
import threading

KINDS = ("client", "replica", "sentinel")

# What the client side of a connection sends that says who it is (lowercased).
MARKERS = ((b"replconf", "replica"), (b"psync", "replica"), (b"sentinel-", "sentinel"))


class _Conn:
    """One proxied connection: its two sockets and who its peer is."""

    def __init__(self, down, up):
        self.down, self.up = down, up
        self.kind = "client"
        self.seen = b""  # the tail of what the peer sent, until it is classified
        self.classified = False
        self.ended = 0  # directions that ended

    def note(self, data):
        if self.classified:
            return
        self.seen = (self.seen + data.lower())[-4096:]
        for marker, kind in MARKERS:
            if marker in self.seen:
                self.kind, self.classified, self.seen = kind, True, b""
                return

    def close(self):
        for s in (self.down, self.up):
            try:
                s.close()
            except OSError:
                pass


class Proxy:
    """Listens on an ephemeral loopback port and forwards to 127.0.0.1:`target_port`."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.port = self.listener.getsockname()[1]
        self.blocked = frozenset()
        self.changed = threading.Condition()
        self.conns = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def block(self, kinds):
        """Partitions the node from these kinds of peers (see the module's doc)."""
        assert set(kinds) <= set(KINDS), kinds
        with self.changed:
            self.blocked = frozenset(kinds)
            self.changed.notify_all()

    def heal(self):
        self.block(())

    def close(self):
        with self.changed:
            self.closed = True
            self.blocked = frozenset()
            self.changed.notify_all()
        try:
            self.listener.close()
        except OSError:
            pass
        for c in list(self.conns):
            c.close()

    def _wait_open(self, conn):
        """Blocks while `conn`'s kind is cut off; False once the proxy is closed."""
        with self.changed:
            while conn.kind in self.blocked and not self.closed:
                self.changed.wait()
            return not self.closed

    def _accept(self):
        while not self.closed:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._open, args=(down,), daemon=True).start()

    def _open(self, down):
        conn = _Conn(down, None)
        # A new connection is a client's until it says otherwise: while clients are cut off
        # it stalls before it reaches the node, as a SYN that gets no answer.
        if not self._wait_open(conn):
            down.close()
            return
        try:
            up = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            up.settimeout(None)
        except OSError:
            down.close()
            return
        # Both ends as the nodes set theirs: small replies go out at once.
        for sock in (down, up):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.up = up
        self.conns.append(conn)
        threading.Thread(target=self._pump, args=(conn, down, up, True), daemon=True).start()
        threading.Thread(target=self._pump, args=(conn, up, down, False), daemon=True).start()

    def _pump(self, conn, src, dst, from_peer):
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if from_peer and data:
                conn.note(data)
            # Held, not dropped, while this kind of peer is cut off; an end of stream too.
            if not self._wait_open(conn):
                break
            if not data:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                break
            try:
                dst.sendall(data)
            except OSError:
                break
        # Once both directions ended, the connection is closed and forgotten.
        with self.changed:
            conn.ended += 1
            done = conn.ended == 2
        if done:
            conn.close()
            try:
                self.conns.remove(conn)
            except ValueError:
                pass
