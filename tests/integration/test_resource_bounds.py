"""Hostile clients against a real broker's memory and connection slots (issue 13, items
7 and 9): clients that pipeline Fetch requests and never read their socket; hundreds
of idle connections; slow-loris clients that send one byte a second; too many
connections from one address. Each is written with raw sockets; the broker must stay
within its bounds and keep serving a normal client with its own timeouts."""

from __future__ import annotations

import resource
import socket
import struct
import threading
import time

import pytest

from drover_testlib import (API_API_VERSIONS, API_FETCH, API_PRODUCE, RawConn, ck_admin,
                            ck_consume, ck_create_topic, frame, http_get, kcat, kstr,
                            parse_api_versions_v0, parse_produce_v3, produce_v3_request,
                            record_batch, request_header, unique_topic)

MIB = 1024 * 1024
# A value that fits one batch under Kafka's default message.max.bytes (1048588 bytes).
VALUE_SIZE = 1_000_000


def rss_bytes(pid: int) -> int:
    """Resident set size of process `pid`, from /proc/<pid>/status (VmRSS, kB)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def produce_large(broker, topic: str, partition: int, n: int) -> None:
    """Produces `n` values of VALUE_SIZE bytes to `partition`, one batch each."""
    value = (bytes(range(256)) * (VALUE_SIZE // 256 + 1))[:VALUE_SIZE]
    with RawConn(broker, timeout=30) as c:
        for i in range(n):
            batch = record_batch([(b"k%d" % i, value)])
            corr = c.request(API_PRODUCE, 3, produce_v3_request(topic, partition, batch))
            ((err, base),) = parse_produce_v3(c.recv_response(corr)).values()
            assert (err, base) == (0, i), f"produce {i}: error {err}, base offset {base}"


def fetch_v4_all(topic: str, partitions: int) -> bytes:
    """A Fetch v4 body for every partition of `topic` from offset 0, asking for as much
    as the protocol allows (max_bytes and partition_max_bytes 2 GiB − 1), without
    waiting."""
    return (struct.pack(">iiiib", -1, 0, 0, 0x7FFFFFFF, 0) + struct.pack(">i", 1) + kstr(topic)
            + struct.pack(">i", partitions)
            + b"".join(struct.pack(">iqi", p, 0, 0x7FFFFFFF) for p in range(partitions)))


def metadata_answers(broker, timeout: float = 10) -> None:
    """A new confluent-kafka client gets Metadata within its own timeout."""
    md = ck_admin(broker).list_topics(timeout=timeout)
    assert md.brokers, "Metadata without brokers"


def new_clients_get_metadata(broker, rounds: int = 1) -> None:
    """`rounds` times: a new confluent-kafka client and kcat each get Metadata within
    their own timeouts (10 s, 30 s)."""
    for _ in range(rounds):
        metadata_answers(broker, timeout=10)
        r = kcat(broker, ["-L"], timeout=30)
        assert b"1 brokers" in r.stdout, r.stdout


def long_poll_connection(broker, topic: str, corr: int) -> socket.socket:
    """A new connection that has sent a Fetch v4 of partition 0 of the empty `topic` at
    offset 0: it waits its max_wait_ms (30 s) for min_bytes (1)."""
    body = (struct.pack(">iiiib", -1, 30_000, 1, 1 << 20, 0) + struct.pack(">i", 1)
            + kstr(topic) + struct.pack(">i", 1) + struct.pack(">iqi", 0, 0, 1 << 20))
    s = socket.create_connection((broker.host, broker.port), timeout=10)
    s.sendall(frame(request_header(API_FETCH, 4, corr) + body))
    return s


def raise_nofile(want: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            pytest.skip(f"needs {want} open files, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def metric(broker, name: str) -> int:
    """A metric's value from the admin API's /metrics (0 when not there yet, as a
    labelled counter before its first increment)."""
    status, _, body = http_get(broker.admin_url + "/metrics")
    assert status == 200, f"/metrics answered {status}"
    for line in body.splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    return 0


def open_connections(broker) -> int:
    return metric(broker, "drover_connections_open")


def closed_by_broker(broker, reason: str) -> int:
    return metric(broker, f'drover_connections_closed_by_broker_total{{reason="{reason}"}}')


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the peer closed `sock` (without waiting)."""
    try:
        sock.setblocking(False)
        try:
            data = sock.recv(65536)
        finally:
            sock.setblocking(True)
    except BlockingIOError:
        return False
    except OSError:
        return True
    return data == b""


# ---------------------------------------------------------------------------------
# Item 7: clients that pipeline Fetch requests and never read
# ---------------------------------------------------------------------------------
def test_clients_that_never_read_their_fetches_do_not_exhaust_memory(broker_factory):
    """Four connections each pipeline 64 Fetch requests for everything in a topic of 4
    partitions × 24 MB and never read a byte. The broker's RSS must stay under a bound
    the unbounded response queue exceeds several times over (about 2.5 GB in all before
    the fix); once the broker has disconnected them (write timeout), the memory must go
    back to the OS; and a normal consumer is served."""
    b = broker_factory("[server]\nwrite_timeout_ms = 5000\n")
    topic = unique_topic("unread")
    partitions, per_partition = 4, 24
    ck_create_topic(b, topic, partitions)
    for p in range(partitions):
        produce_large(b, topic, p, per_partition)
    pid = b.proc.pid
    baseline = rss_bytes(pid)
    bound = baseline + 600 * MIB
    fetch = fetch_v4_all(topic, partitions)
    hostile = []
    peak = baseline
    try:
        for _ in range(4):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            # As little as the kernel allows in the client's receive buffer.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.settimeout(10)
            s.connect((b.host, b.port))
            s.sendall(b"".join(frame(request_header(API_FETCH, 4, corr) + fetch)
                               for corr in range(1, 65)))
            hostile.append(s)
        # Watch the broker while the responses pile up, until it has disconnected every
        # client for not reading.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and peak <= bound:
            peak = max(peak, rss_bytes(pid))
            if open_connections(b) == 0:
                break
            time.sleep(0.1)
        assert peak <= bound, (
            f"broker RSS reached {peak // MIB} MiB with 4 non-reading clients "
            f"(baseline {baseline // MIB} MiB, bound {bound // MIB} MiB)")
        assert open_connections(b) == 0, "non-reading clients still connected after 30 s"
        assert closed_by_broker(b, "write_timeout") == 4
    finally:
        for s in hostile:
            s.close()
    # What they cost is given back.
    back = baseline + 150 * MIB
    deadline = time.monotonic() + 15
    while rss_bytes(pid) > back and time.monotonic() < deadline:
        time.sleep(0.2)
    after = rss_bytes(pid)
    assert after <= back, (
        f"broker RSS still {after // MIB} MiB after the clients were disconnected "
        f"(baseline {baseline // MIB} MiB, peak {peak // MIB} MiB)")
    b.assert_alive()
    # A normal consumer is served.
    got = ck_consume(b, topic, {p: per_partition for p in range(partitions)}, timeout=60)
    for p in range(partitions):
        assert [r.offset for r in got[p]] == list(range(per_partition))
        assert all(len(r.value) == VALUE_SIZE for r in got[p])


# ---------------------------------------------------------------------------------
# Item 9: idle and slow connections must not lock new clients out
# ---------------------------------------------------------------------------------
def test_1500_idle_connections_do_not_lock_out_a_new_client(broker_factory):
    """1,500 idle connections against the default cap of 1,024: 500 that sent one
    request and stay open, then 1,000 that never send anything. The first-request
    deadline is set to a minute so that only idle eviction at the cap can make room:
    new clients (confluent-kafka and kcat) must get Metadata within their own 10 s
    timeouts."""
    raise_nofile(4096)
    b = broker_factory("[server]\nfirst_request_timeout_ms = 60000\n")
    idle = []
    try:
        for i in range(500):
            c = RawConn(b, timeout=10)
            corr = c.request(API_API_VERSIONS, 0, b"")
            err, _ = parse_api_versions_v0(c.recv_response(corr))
            assert err == 0
            idle.append(c)
        for i in range(1000):
            s = socket.create_connection((b.host, b.port), timeout=10)
            idle.append(s)
        new_clients_get_metadata(b, rounds=3)
        b.assert_alive()
    finally:
        for c in idle:
            c.close()
    # Every connection beyond the cap made room by evicting one.
    assert closed_by_broker(b, "evicted") >= 1500 - 1024
    # One line per second at most, however many connections were evicted.
    evictions = b.stderr_text().count("closing idle connection")
    assert 1 <= evictions < 100, f"{evictions} eviction lines: not rate-limited"


def test_connections_closed_during_a_long_poll_give_their_slots_back(broker_factory):
    """1,100 connections against the default cap of 1,024, each sending one Fetch that
    long-polls for 30 s at the log end and closing its socket at once (found by a
    new-user try: the slots stayed taken until the long polls ended, so anyone could
    keep new clients out by repeating this every 30 s). A closed connection drops the
    answers it waited for: the open-connection count falls back at once, and new
    clients (confluent-kafka and kcat) get Metadata within their own 10 s timeouts."""
    raise_nofile(4096)
    b = broker_factory()
    topic = unique_topic("long-poll")
    ck_create_topic(b, topic, 1)
    started = time.monotonic()
    for i in range(1100):
        long_poll_connection(b, topic, i).close()
    assert time.monotonic() - started < 25, "the loop itself outlasted the long polls"
    deadline = time.monotonic() + 10
    while open_connections(b) > 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert open_connections(b) <= 5, open_connections(b)
    new_clients_get_metadata(b)
    b.assert_alive()


def test_connections_held_open_with_long_polls_do_not_lock_out_a_new_client(broker_factory):
    """1,030 connections against the default cap of 1,024, each kept open with a Fetch
    long-polling 30 s at the log end (a client that holds every slot busy with waits).
    A long poll is waiting, not working: such a connection counts as idle at the cap,
    so new clients (confluent-kafka and kcat) evict the idlest and get Metadata within
    their own 10 s timeouts, again and again while the long polls last."""
    raise_nofile(4096)
    b = broker_factory()
    topic = unique_topic("long-hold")
    ck_create_topic(b, topic, 1)
    held = []
    try:
        for i in range(1030):
            held.append(long_poll_connection(b, topic, i))
        new_clients_get_metadata(b, rounds=3)
        b.assert_alive()
    finally:
        for s in held:
            s.close()
    assert closed_by_broker(b, "evicted") >= 1030 - 1024



    """Sixteen clients fill every connection slot (max_connections = 16), each sending
    a 200-byte request one byte per second and reconnecting when closed. Each must be
    closed by the first-request deadline (2 s) long before its request is complete or
    the frame timeout (60 s) passes, and eight new clients in a row must get Metadata
    within their 10 s timeouts."""
    b = broker_factory("[server]\nmax_connections = 16\nfirst_request_timeout_ms = 2000\n"
                       "frame_timeout_ms = 60000\n")
    payload = frame(request_header(API_API_VERSIONS, 0, 1, client_id="x" * 186))
    assert len(payload) == 200
    stop = threading.Event()
    closed_early = []  # bytes sent before each close
    errors = []

    def loris():
        while not stop.is_set():
            try:
                s = socket.create_connection((b.host, b.port), timeout=10)
            except OSError as e:
                errors.append(repr(e))
                return
            sent = 0
            try:
                while not stop.is_set() and sent < len(payload):
                    s.sendall(payload[sent:sent + 1])
                    sent += 1
                    if stop.wait(1.0) or closed_by_peer(s):
                        break
                if not stop.is_set():
                    closed_early.append(sent)
            except OSError:
                closed_early.append(sent)
            finally:
                s.close()

    threads = [threading.Thread(target=loris, daemon=True) for _ in range(16)]
    for t in threads:
        t.start()
    try:
        time.sleep(1)
        for _ in range(8):
            metadata_answers(b, timeout=10)
        deadline = time.monotonic() + 30
        while len(closed_early) < 16 and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=5)
    assert not errors, errors
    assert len(closed_early) >= 16, f"only {len(closed_early)} slow clients were closed in 30 s"
    assert max(closed_early) < len(payload), "a slow client completed its request"
    # Most by the deadline; a few were evicted at the cap to let a new client in.
    deadline_closes = closed_by_broker(b, "first_request_timeout")
    assert deadline_closes >= 1
    assert deadline_closes + closed_by_broker(b, "evicted") >= 16
    b.assert_alive()
    metadata_answers(b)


@pytest.mark.parametrize("config,allowed", [
    ("max_connections_per_ip = 3\n", 3),
    ("max_connections_per_ip = 1\n[server.max_connections_per_ip_overrides]\n"
     "\"127.0.0.1\" = 4\n", 4),
])
def test_per_address_limit(broker_factory, config, allowed):
    """Connections over the address's limit are closed at once, with one log line per
    second at most; a slot freed by a client that left is given to the next one."""
    b = broker_factory("[server]\n" + config)
    held = []
    try:
        for _ in range(allowed):
            c = RawConn(b)
            corr = c.request(API_API_VERSIONS, 0, b"")
            assert parse_api_versions_v0(c.recv_response(corr))[0] == 0
            held.append(c)
        for _ in range(20):
            with RawConn(b) as extra:
                try:
                    extra.request(API_API_VERSIONS, 0, b"")
                except (BrokenPipeError, ConnectionResetError):
                    continue
                assert extra.wait_closed(timeout=10) == b"", "an extra connection was answered"
        # The connections within the limit are still served.
        for c in held:
            corr = c.request(API_API_VERSIONS, 0, b"")
            assert parse_api_versions_v0(c.recv_response(corr))[0] == 0
        # One leaves: the next client gets its place (once the broker saw the close).
        held.pop().close()
        deadline = time.monotonic() + 10
        while True:
            with RawConn(b) as c:
                try:
                    corr = c.request(API_API_VERSIONS, 0, b"")
                    assert parse_api_versions_v0(c.recv_response(corr))[0] == 0
                    break
                except (EOFError, ConnectionResetError, BrokenPipeError):
                    assert time.monotonic() < deadline, "the freed place was not given back"
                    time.sleep(0.1)
    finally:
        for c in held:
            c.close()
    assert closed_by_broker(b, "per_ip") >= 20
    log = b.stderr_text()
    refusals = log.count("refusing connection")
    assert 1 <= refusals < 20, f"{refusals} refusal lines for 20 refused connections"
    assert "max_connections_per_ip" in log
