"""The admin listener's bounds (issue 29; docs/security.md, "The admin API"): at most
`admin.max_connections` connections at once (one more is closed at once and counted),
and a request head must arrive within `admin.header_timeout_ms` — a hostile client
that opens the cap's worth of connections and dribbles header bytes, or never sends
them, is closed at that deadline, after which honest calls (`drover admin`, plain HTTP)
work again; an idle keep-alive connection is closed the same way. Over plain HTTP and
over TLS (where a stalled handshake holds a slot until `first_request_timeout_ms`).
No timing asserts beyond generous deadlines."""

from __future__ import annotations

import socket
import ssl
import threading
import time

import pytest

import conftest
from conftest import Broker
from test_admin_auth import counters, drover, request, started, tls_context  # noqa: F401
from tls_testlib import OPENSSL, Certs

CAP = 4
HEADER_TIMEOUT_MS = 2500


class Dribbler:
    """A connection that sends a request line and then one header byte every 100 ms,
    never finishing its headers, until the server closes it (`closed` is set)."""

    def __init__(self, port: int, wrap=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        if wrap is not None:
            self.sock = wrap(self.sock)
        self.closed = threading.Event()
        self.sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        try:
            while True:
                self.sock.sendall(b"a")
                time.sleep(0.1)
        except OSError:
            pass
        finally:
            self.closed.set()
            self.sock.close()


def refused_at_once(port: int, wrap=None) -> bool:
    """Whether a new connection is closed without an answer (with `wrap`: before its
    TLS handshake finishes)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        if wrap is not None:
            s = wrap(s)
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        return s.recv(100) == b""
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        return True
    finally:
        s.close()


def wait_all_closed(conns, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    for c in conns:
        assert c.closed.wait(max(0.0, deadline - time.monotonic())), \
            "a slow connection outlived admin.header_timeout_ms by far"


def test_slow_headers_and_the_connection_cap_over_plain_http(tmp_path, started):
    b = started(Broker(tmp_path / "broker", config=f"""
[admin]
max_connections = {CAP}
header_timeout_ms = {HEADER_TIMEOUT_MS}
"""))
    url = b.admin_url

    # Under the cap, honest calls work while slow connections dribble. (Two slots left:
    # an honest connection's slot comes back only once the listener has seen it close.)
    slow = [Dribbler(b.admin_port) for _ in range(CAP - 2)]
    assert request(url + "/v1/health")[0] == 200
    r = drover("admin", "--admin", url, "offset-store", "status")
    assert r.returncode == 0 and '"configured":"embedded"' in r.stdout, (r.stdout, r.stderr)

    # At the cap, one more connection is closed at once.
    time.sleep(0.3)
    slow += [Dribbler(b.admin_port) for _ in range(2)]
    time.sleep(0.3)
    assert not any(c.closed.is_set() for c in slow), "closed before the header timeout"
    assert refused_at_once(b.admin_port)

    # The slow ones are closed at the header deadline (however many bytes they sent),
    # after which honest calls work again.
    wait_all_closed(slow, 30)
    assert request(url + "/v1/health")[0] == 200
    r = drover("admin", "--admin", url, "offset-store", "status")
    assert r.returncode == 0, r.stderr

    # A connection that never sends anything, and an idle keep-alive connection after
    # its answer, are closed by the same deadline.
    with socket.create_connection(("127.0.0.1", b.admin_port), timeout=30) as silent, \
            socket.create_connection(("127.0.0.1", b.admin_port), timeout=30) as idle:
        idle.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer = idle.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200"), answer
        for s in (silent, idle):
            s.settimeout(30)
            assert s.recv(4096) == b"", "the connection stayed open"

    status, _, body = request(url + "/metrics")
    assert status == 200, body
    m = counters(body)
    assert m['drover_admin_connections_refused_total{reason="limit"}'] >= 1, m
    assert m['drover_admin_connections_refused_total{reason="header_timeout"}'] >= CAP + 2, m
    logs = b.all_logs()
    assert "admin.max_connections" in logs and "admin.header_timeout_ms" in logs


@pytest.mark.skipif(OPENSSL is None, reason="the openssl CLI is needed")
def test_slow_handshakes_and_headers_over_tls(tmp_path, started):
    certs = Certs(tmp_path / "certs")
    certs.broker = certs.issue("broker", "/O=Drover Test/CN=localhost", kind="server")
    token_file = tmp_path / "admin.token"
    token_file.write_text("t" * 32 + "\n")
    token_file.chmod(0o600)
    b = started(Broker(tmp_path / "broker", config=f"""
[server]
first_request_timeout_ms = {HEADER_TIMEOUT_MS}
[admin]
max_connections = {CAP}
header_timeout_ms = {HEADER_TIMEOUT_MS}
token_file = "{token_file}"
public_read = ["/metrics", "/v1/health"]
[admin.ssl]
certificate_chain = "{certs.broker[0]}"
private_key = "{certs.broker[1]}"
"""))
    url = f"https://localhost:{b.admin_port}"
    ctx = tls_context(certs)

    def wrap(sock: socket.socket) -> ssl.SSLSocket:
        return ctx.wrap_socket(sock, server_hostname="localhost")

    # Half the slots: TLS connections dribbling headers; the other half: TCP
    # connections that never start their handshake.
    dribblers = [Dribbler(b.admin_port, wrap) for _ in range(CAP // 2)]
    stalled = [socket.create_connection(("127.0.0.1", b.admin_port), timeout=30)
               for _ in range(CAP - CAP // 2)]
    time.sleep(0.3)
    assert refused_at_once(b.admin_port, wrap)

    wait_all_closed(dribblers, 30)
    for s in stalled:
        try:
            assert s.recv(100) == b""
        except ConnectionResetError:
            pass
        s.close()
    assert request(url + "/v1/health", context=ctx)[0] == 200
    r = drover("admin", "--admin", url, "--ca-file", str(certs.ca), "--token-file",
               str(token_file), "offset-store", "status")
    assert r.returncode == 0 and '"configured":"embedded"' in r.stdout, (r.stdout, r.stderr)

    status, _, body = request(url + "/metrics", context=ctx)
    assert status == 200, body
    m = counters(body)
    assert m['drover_admin_connections_refused_total{reason="limit"}'] >= 1, m
    assert m['drover_admin_connections_refused_total{reason="header_timeout"}'] >= CAP // 2, m
    assert m.get('drover_tls_handshake_failures_total{listener="admin",reason="timeout"}', 0) \
        >= CAP - CAP // 2, m
