"""TLS listeners (issue 29 items 1-2, docs/operations.md "Listeners and TLS"): one broker
with a PLAINTEXT, an SSL and an mTLS listener (`server.listeners`), certificates made
here with the openssl CLI (two CAs, the broker's chain, client certificates), and real
clients over them: confluent-kafka, kafka-python and kcat produce and consume in groups
over SSL and mTLS; a client certificate from another CA is refused while the others
keep working; plaintext bytes and a stalled handshake on the TLS port are closed and
counted; Metadata, DescribeCluster and FindCoordinator (the native protocol's too, over
TLS) answer with the listener's own address; and a certificate reload (SIGHUP, `POST
/v1/tls/reload`) serves the new chain to new connections while an open consumer keeps
consuming."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import conftest
from conftest import Broker, free_port, start_or_fail, stop_and_show_logs
from drover_testlib import (
    API_METADATA,
    Msg,
    RawConn,
    ck_consumer,
    ck_produce,
    ck_producer,
    http_get,
    kcat_path,
    kp_consumer,
    kp_producer,
    request_header,
    frame,
    unique_topic,
)
from test_native_group import PLUGIN_LIBS
from tls_testlib import OPENSSL, Certs, ConfigListenersBroker

pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl CLI is needed")

NODE_MODULES = Path(__file__).resolve().parents[2] / "target" / "test-node" / "node_modules"

# The handshake and first-request deadline of these brokers, ms (default 10000).
FIRST_REQUEST_TIMEOUT_MS = 1500


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    c = Certs(tmp_path_factory.mktemp("tls-certs"))
    c.broker = c.issue("broker", "/O=Drover Test/CN=localhost", kind="server")
    c.alice = c.issue("alice", "/C=US/O=Acme/OU=eng/CN=alice", kind="client")
    c.mallory = c.issue("mallory", "/C=US/O=Acme/OU=eng/CN=mallory", kind="client",
                        ca="other-ca")
    return c


# ---------------------------------------------------------------------------------
# A broker with three listeners
# ---------------------------------------------------------------------------------
class TlsBroker(ConfigListenersBroker):
    """A broker whose listeners are `server.listeners`: PLAINTEXT at `port` (what the
    fixtures' checks connect to), SSL at `ssl_port` (advertised as `localhost`, so a
    client can tell which listener's address it was given), MTLS (protocol SSL, client
    certificates required) at `mtls_port`. Its certificate files are copies in its work
    directory, so a test can replace them."""

    def __init__(self, workdir: Path, certs: Certs, *, extra: str = "", tables: str = "",
                 coordinator: bool = True):
        super().__init__(workdir)
        self.certs = certs
        self.ssl_port = free_port()
        self.mtls_port = free_port()
        self.chain = workdir / "broker-chain.pem"
        self.key = workdir / "broker.key"
        shutil.copyfile(certs.broker[0], self.chain)
        shutil.copyfile(certs.broker[1], self.key)
        os.chmod(self.key, 0o600)
        self.config_path = workdir / "drover.toml"
        plugins = '[plugins]\nrequired = ["drover-coordinator", "range", "embedded"]\n'
        self.config_path.write_text((plugins if coordinator else "") + f"""
[server]
first_request_timeout_ms = {FIRST_REQUEST_TIMEOUT_MS}
listeners = ["PLAINTEXT://127.0.0.1:{self.port}", "SSL://127.0.0.1:{self.ssl_port}",
             "MTLS://127.0.0.1:{self.mtls_port}"]
advertised_listeners = ["SSL://localhost:{self.ssl_port}"]
listener_security_protocol_map = {{ PLAINTEXT = "PLAINTEXT", SSL = "SSL", MTLS = "SSL" }}
{extra}
[server.ssl]
certificate_chain = "{self.chain}"
private_key = "{self.key}"

[server.listener_ssl.MTLS]
certificate_chain = "{self.chain}"
private_key = "{self.key}"
client_auth = "required"
client_ca = "{certs.ca}"
principal_mapping_rules = "RULE:^CN=([^,]*),OU=eng,.*$/$1@eng/U, DEFAULT"
{tables}""")

    @property
    def ssl_bootstrap(self) -> str:
        return f"localhost:{self.ssl_port}"

    @property
    def mtls_bootstrap(self) -> str:
        return f"127.0.0.1:{self.mtls_port}"


@pytest.fixture
def tls_broker_factory(tmp_path, request, certs, monkeypatch):
    """make(extra="") -> a started TlsBroker with the coordinator. Its log level shows
    each TLS connection's principal (server::connection at debug)."""
    monkeypatch.setenv("DROVER_TEST_RUST_LOG", "info,drover_host::server::connection=debug")
    made: list[TlsBroker] = []

    def make(extra: str = "") -> TlsBroker:
        b = TlsBroker(tmp_path / f"broker{len(made)}", certs, extra=extra)
        made.append(b)
        conftest.install_plugins(b, [lib for lib in PLUGIN_LIBS if "sticky" not in lib
                                     and "round_robin" not in lib])
        return start_or_fail(b)

    yield make
    stop_and_show_logs(request, made)


@pytest.fixture
def tls_broker(tls_broker_factory) -> TlsBroker:
    return tls_broker_factory()


# ---------------------------------------------------------------------------------
# Client settings
# ---------------------------------------------------------------------------------
def ck_ssl(b: TlsBroker, client: tuple[Path, Path] | None = None, **extra) -> dict:
    conf = {"bootstrap.servers": b.mtls_bootstrap if client else b.ssl_bootstrap,
            "security.protocol": "SSL", "ssl.ca.location": str(b.certs.ca)}
    if client:
        conf["ssl.certificate.location"] = str(client[0])
        conf["ssl.key.location"] = str(client[1])
    conf.update(extra)
    return conf


def kp_ssl(b: TlsBroker, client: tuple[Path, Path] | None = None) -> dict:
    conf = dict(bootstrap_servers=b.mtls_bootstrap if client else b.ssl_bootstrap,
                security_protocol="SSL", ssl_cafile=str(b.certs.ca))
    if client:
        conf.update(ssl_certfile=str(client[0]), ssl_keyfile=str(client[1]))
    return conf


def kcat_ssl(b: TlsBroker, client: tuple[Path, Path] | None = None) -> list[str]:
    args = ["-b", b.mtls_bootstrap if client else b.ssl_bootstrap,
            "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={b.certs.ca}",
            "-X", "socket.timeout.ms=10000", "-m", "10"]
    if client:
        args += ["-X", f"ssl.certificate.location={client[0]}",
                 "-X", f"ssl.key.location={client[1]}"]
    return args


def run_kcat(args: list[str], *, input: bytes | None = None, timeout: float = 60):
    r = subprocess.run([kcat_path(), *args], input=input, capture_output=True, timeout=timeout)
    assert r.returncode == 0, (f"kcat {' '.join(args)} exited {r.returncode}\n"
                               f"{r.stderr.decode(errors='replace')[-2000:]}")
    return r


def ck_group_consume(b: TlsBroker, conf: dict, topic: str, n: int, group: str,
                     timeout: float = 60) -> list[bytes]:
    """n records of `topic` through a confluent-kafka group member (classic protocol),
    committed."""
    c = ck_consumer(b, **{**conf, "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": True, "enable.auto.offset.store": True})
    got: list[bytes] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(got) < n:
            assert time.monotonic() < deadline, f"group {group}: {len(got)} of {n} records"
            for m in c.consume(num_messages=100, timeout=0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
        c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def kp_group_consume(b: TlsBroker, conf: dict, topic: str, n: int, group: str,
                     timeout: float = 60) -> list[bytes]:
    c = kp_consumer(b, **{**conf, "group_id": group, "auto_offset_reset": "earliest",
                             "enable_auto_commit": False})
    got: list[bytes] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(got) < n:
            assert time.monotonic() < deadline, f"group {group}: {len(got)} of {n} records"
            for recs in c.poll(timeout_ms=500).values():
                got += [r.value for r in recs]
        c.commit()
    finally:
        c.close()
    return got


def metrics(b: Broker) -> dict[str, float]:
    status, _, body = http_get(f"{b.admin_url}/metrics")
    assert status == 200
    out = {}
    for line in body.splitlines():
        if line.startswith("drover_tls"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def wait_metric(b: Broker, name: str, at_least: float, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while True:
        got = metrics(b).get(name, 0)
        if got >= at_least:
            return
        assert time.monotonic() < deadline, f"{name} is {got}, want >= {at_least}: {metrics(b)}"
        time.sleep(0.1)


def served_subject(port: int, cafile: Path) -> dict[str, str]:
    """The subject of the certificate a new TLS connection to `port` is served."""
    ctx = ssl.create_default_context(cafile=str(cafile))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        with ctx.wrap_socket(s, server_hostname="localhost") as t:
            return dict(rdn[0] for rdn in t.getpeercert()["subject"])


# ---------------------------------------------------------------------------------
# SSL and mTLS with every client
# ---------------------------------------------------------------------------------
def test_ssl_confluent_kafka_and_kcat_produce_and_consume_in_groups(tls_broker):
    b = tls_broker
    topic = unique_topic("tls")
    msgs = [Msg(b"k%d" % i, b"ssl-%03d" % i) for i in range(50)]
    ck_produce(None, topic, msgs, producer=ck_producer(b, **ck_ssl(b)))
    got = ck_group_consume(b, ck_ssl(b), topic, 50, "tls-ck")
    assert sorted(got) == sorted(m.value for m in msgs)
    # kcat: produce over SSL, then read the whole topic in a group.
    run_kcat([*kcat_ssl(b), "-P", "-t", topic], input=b"kcat-1\nkcat-2\n")
    r = run_kcat([*kcat_ssl(b), "-G", "tls-kcat", "-o", "beginning", "-c", "52", "-f", "%s\\n",
                  "-q", topic])
    assert sorted(r.stdout.split()) == sorted([m.value for m in msgs] + [b"kcat-1", b"kcat-2"])
    assert metrics(b)['drover_tls_handshakes_total{listener="SSL"}'] >= 3


def test_ssl_kafka_python_produces_and_consumes_in_a_group(tls_broker):
    b = tls_broker
    topic = unique_topic("tls-kp")
    p = kp_producer(b, **kp_ssl(b))
    try:
        for i in range(30):
            p.send(topic, key=b"k", value=b"kp-%02d" % i)
        p.flush(timeout=30)
    finally:
        p.close(timeout=10)
    got = kp_group_consume(b, kp_ssl(b), topic, 30, "tls-kp")
    assert sorted(got) == [b"kp-%02d" % i for i in range(30)]


def test_mtls_clients_get_their_mapped_principal_and_another_ca_is_refused(tls_broker):
    b = tls_broker
    alice = b.certs.alice
    topic = unique_topic("mtls")
    ck_produce(None, topic, [Msg(None, b"ck-%d" % i) for i in range(10)],
               producer=ck_producer(b, **ck_ssl(b, alice)))
    run_kcat([*kcat_ssl(b, alice), "-P", "-t", topic], input=b"kcat\n")
    p = kp_producer(b, **kp_ssl(b, alice))
    try:
        p.send(topic, value=b"kp").get(timeout=30)
    finally:
        p.close(timeout=10)
    # A consumer with a certificate from another CA: refused, counted; nothing else moves.
    before = metrics(b).get(
        'drover_tls_handshake_failures_total{listener="MTLS",reason="client_certificate"}', 0)
    # (kcat with mallory's certificate and kcat without one — client_auth is
    # "required" — run beside kafka-python with mallory's.)
    refused = [subprocess.Popen([kcat_path(), *args, "-L", "-m", "2"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
               for args in (kcat_ssl(b, b.certs.mallory), [*kcat_ssl(b), "-b", b.mtls_bootstrap])]
    kp_bad = None
    with pytest.raises(Exception):
        kp_bad = kp_consumer(b, **kp_ssl(b, b.certs.mallory), api_version_auto_timeout_ms=2000)
    if kp_bad is not None:
        kp_bad.close()
    for p in refused:
        out, _ = p.communicate(timeout=30)
        assert p.returncode != 0, out
    wait_metric(b, 'drover_tls_handshake_failures_total{listener="MTLS",reason="client_certificate"}',
                before + 3)
    # The good clients keep working: a group over mTLS reads all 12 records.
    got = ck_group_consume(b, ck_ssl(b, alice), topic, 12, "mtls-ck")
    assert sorted(got) == sorted([b"ck-%d" % i for i in range(10)] + [b"kcat", b"kp"])
    kcat_group = subprocess.Popen(
        [kcat_path(), *kcat_ssl(b, alice), "-G", "mtls-kcat", "-o", "beginning", "-c", "12",
         "-f", "%s\\n", "-q", topic], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    got = kp_group_consume(b, kp_ssl(b, alice), topic, 12, "mtls-kp")
    assert len(got) == 12
    out, err = kcat_group.communicate(timeout=60)
    assert kcat_group.returncode == 0, err[-2000:]
    assert len(out.split()) == 12, out
    # The principal: the subject (RFC 2253, last RDN first) through the listener's rule.
    log = b.stderr_text()
    assert "principal=User:ALICE@ENG" in log, [l for l in log.splitlines() if "TLS" in l][-5:]
    assert "-----BEGIN" not in log
    b.assert_alive()


def test_kafkajs_produces_and_consumes_in_a_group_over_mtls(tls_broker):
    """kafkajs with alice's certificate on the mTLS listener: 20 records produced and
    read back in a group."""
    node = shutil.which("node")
    if node is None or not (NODE_MODULES / "kafkajs" / "package.json").exists():
        pytest.skip("Node.js or kafkajs is not installed (scripts/install-test-deps.sh)")
    b, client = tls_broker, tls_broker.certs.alice
    topic = unique_topic("mtls-kjs")
    env = dict(os.environ, NODE_PATH=str(NODE_MODULES), KAFKAJS_CERT=str(client[0]),
               KAFKAJS_KEY=str(client[1]))
    run = subprocess.run([node, str(Path(__file__).with_name("kafkajs_sasl.js")),
                          b.mtls_bootstrap, str(b.certs.ca), "-", topic, "mtls-kjs", "20"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"kafkajs exited {run.returncode}: {run.stderr[-3000:]}"
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["consumed"] == sorted(f"kjs-{i}" for i in range(20))


# ---------------------------------------------------------------------------------
# Handshakes that fail
# ---------------------------------------------------------------------------------
def api_versions_v0() -> bytes:
    return frame(request_header(18, 0, 1))


def closed_by_broker(s: socket.socket, timeout: float) -> None:
    """Waits for the broker to close `s` without answering (a reset counts: it closes
    with the client's bytes unread)."""
    s.settimeout(timeout)
    try:
        got = s.recv(100)
    except ConnectionResetError:
        return
    assert got == b"", f"the broker answered {got[:20]!r}"


def test_plaintext_and_stalled_handshakes_are_closed_and_counted(tls_broker):
    b = tls_broker
    key = 'drover_tls_handshake_failures_total{listener="SSL",reason="%s"}'
    # Plaintext Kafka to the TLS port: closed at once, no answer.
    with socket.create_connection(("127.0.0.1", b.ssl_port), timeout=10) as s:
        started = time.monotonic()
        s.sendall(api_versions_v0())
        closed_by_broker(s, 5)
        assert time.monotonic() - started < 2
    wait_metric(b, key % "not_tls", 1)
    # Two stalled handshakes: one that sends nothing, one that stops inside its
    # ClientHello. Both are closed at the first-request deadline.
    stalled = [socket.create_connection(("127.0.0.1", b.ssl_port), timeout=10) for _ in range(2)]
    stalled[1].sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    started = time.monotonic()
    # Meanwhile an SSL client connects and is served.
    assert served_subject(b.ssl_port, b.certs.ca)["commonName"] == "localhost"
    for s in stalled:
        closed_by_broker(s, FIRST_REQUEST_TIMEOUT_MS / 1000 + 5)
        s.close()
    waited = time.monotonic() - started
    assert waited < FIRST_REQUEST_TIMEOUT_MS / 1000 + 3, waited
    wait_metric(b, key % "timeout", 2)
    # A client that does not trust the broker's certificate ends the handshake itself.
    ctx = ssl.create_default_context(cafile=str(b.certs.other_ca))
    with socket.create_connection(("127.0.0.1", b.ssl_port), timeout=10) as s:
        with pytest.raises(ssl.SSLError):
            ctx.wrap_socket(s, server_hostname="localhost")
    wait_metric(b, key % "alert", 1)
    # The plaintext listener is unaffected and still speaks Kafka.
    with RawConn(b) as c:
        c.send_raw(api_versions_v0())
        assert len(c.recv_frame()) > 10
    b.assert_alive()


# ---------------------------------------------------------------------------------
# Each listener's addresses
# ---------------------------------------------------------------------------------
def metadata_brokers_v1(sock) -> list[tuple[int, str, int]]:
    """Metadata v1 for no topics on `sock` (plain or TLS) -> [(node, host, port)]."""
    sock.sendall(frame(request_header(API_METADATA, 1, 7) + struct.pack(">i", 0)))

    def exact(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            assert chunk, "closed"
            buf += chunk
        return buf

    (size,) = struct.unpack(">i", exact(4))
    body = exact(size)
    pos = 4  # correlation id
    (count,) = struct.unpack_from(">i", body, pos)
    pos += 4
    out = []
    for _ in range(count):
        node, hlen = struct.unpack_from(">ih", body, pos)
        pos += 6
        host = body[pos:pos + hlen].decode()
        pos += hlen
        (port, rlen) = struct.unpack_from(">ih", body, pos)
        pos += 6 + max(rlen, 0)
        out.append((node, host, port))
    return out


def test_metadata_describe_cluster_and_find_coordinator_answer_the_listeners_address(tls_broker):
    b = tls_broker
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as s:
        assert metadata_brokers_v1(s) == [(0, "127.0.0.1", b.port)]
    ctx = ssl.create_default_context(cafile=str(b.certs.ca))
    with socket.create_connection(("127.0.0.1", b.ssl_port), timeout=10) as s:
        with ctx.wrap_socket(s, server_hostname="localhost") as t:
            assert metadata_brokers_v1(t) == [(0, "localhost", b.ssl_port)]
    from confluent_kafka.admin import AdminClient
    admin = AdminClient(ck_ssl(b))
    md = admin.list_topics(timeout=10)
    assert [(n.id, n.host, n.port) for n in md.brokers.values()] == [(0, "localhost", b.ssl_port)]
    cluster = admin.describe_cluster(request_timeout=10).result(timeout=15)
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(0, "localhost", b.ssl_port)]
    admin_mtls = AdminClient(ck_ssl(b, b.certs.alice))
    cluster = admin_mtls.describe_cluster(request_timeout=10).result(timeout=15)
    assert [(n.host, n.port) for n in cluster.nodes] == [("127.0.0.1", b.mtls_port)]
    # The native coordinator protocol on the same TLS port: FindCoordinator names the
    # SSL listener's address, and DescribeGroups goes to the coordinator.
    import native_protocol as native
    c = native.Conn("127.0.0.1", b.ssl_port)
    try:
        c.sock = ctx.wrap_socket(c.sock, server_hostname="localhost")
        assert c.find_coordinator("tls-native-group") == (0, 0, "localhost", b.ssl_port)
        resp = c.request(native.DescribeGroupsRequest(["tls-native-group"]))
        assert [g.group_id for g in resp.groups] == ["tls-native-group"], resp
    finally:
        c.close()
    c = native.Conn("127.0.0.1", b.port)
    try:
        assert c.find_coordinator("tls-native-group") == (0, 0, "127.0.0.1", b.port)
    finally:
        c.close()


def test_cluster_brokers_register_every_listener_and_metadata_names_each_on_the_listener_asked(
        tmp_path, certs, request):
    from cluster_testlib import ZooKeeper, wait_until
    zk = ZooKeeper(tmp_path / "zk").start()
    brokers: list[Broker] = []
    try:
        chroot = f"/drover-tls-{os.getpid()}-{free_port()}"
        zk_table = (f"[zookeeper]\nenabled = true\nconnect = \"{zk.connect}\"\n"
                    f"chroot = \"{chroot}\"\nsession_timeout_ms = 3000\n")
        for i in (1, 2):
            b = TlsBroker(tmp_path / f"b{i}", certs, extra=f"broker_id = {i}\n",
                          coordinator=False, tables=zk_table)
            brokers.append(b)
            start_or_fail(b)
        # A third broker with only the PLAINTEXT listener of `--listen`.
        b3 = Broker(tmp_path / "b3", config=f"[server]\nbroker_id = 3\n{zk_table}")
        brokers.append(b3)
        start_or_fail(b3)

        def all_registered():
            for b in brokers:
                status, _, body = http_get(f"{b.admin_url}/v1/cluster")
                if status != 200 or len(json.loads(body)["view"]["brokers"]) != 3:
                    return False
            return True
        wait_until(all_registered, 30, "3 brokers registered")
        b1, b2, b3 = brokers
        with socket.create_connection(("127.0.0.1", b2.port), timeout=10) as s:
            assert sorted(metadata_brokers_v1(s)) == [
                (1, "127.0.0.1", b1.port), (2, "127.0.0.1", b2.port), (3, "127.0.0.1", b3.port)]
        # On SSL and MTLS, the broker without those listeners is left out.
        ctx = ssl.create_default_context(cafile=str(certs.ca))
        with socket.create_connection(("127.0.0.1", b2.ssl_port), timeout=10) as s:
            with ctx.wrap_socket(s, server_hostname="localhost") as t:
                assert sorted(metadata_brokers_v1(t)) == [
                    (1, "localhost", b1.ssl_port), (2, "localhost", b2.ssl_port)]
        ctx.load_cert_chain(str(certs.alice[0]), str(certs.alice[1]))
        with socket.create_connection(("127.0.0.1", b1.mtls_port), timeout=10) as s:
            with ctx.wrap_socket(s, server_hostname="localhost") as t:
                assert sorted(metadata_brokers_v1(t)) == [
                    (1, "127.0.0.1", b1.mtls_port), (2, "127.0.0.1", b2.mtls_port)]
    finally:
        rep = getattr(request.node, "rep_call", None)
        for b in brokers:
            b.kill9()
            if rep is not None and rep.failed:
                print(f"\n===== {b.workdir.name} =====\n" + b.all_logs()[-6000:])
        zk.stop()


# ---------------------------------------------------------------------------------
# Reloading the certificate
# ---------------------------------------------------------------------------------
def replace(path: Path, source: Path) -> None:
    tmp = path.with_suffix(".tmp")
    shutil.copyfile(source, tmp)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def test_reload_by_sighup_and_admin_call_serves_the_new_chain_while_a_consumer_keeps_going(
        tls_broker):
    b = tls_broker
    certs = b.certs
    topic = unique_topic("reload")
    producer = ck_producer(b, **ck_ssl(b))
    ck_produce(None, topic, [Msg(None, b"before")], producer=producer)
    consumer = ck_consumer(b, **ck_ssl(b, None, **{
        "group.id": "tls-reload", "auto.offset.reset": "earliest",
        "enable.auto.commit": True, "enable.auto.offset.store": True}))
    seen: list[bytes] = []

    def consume_until(value: bytes, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while value not in seen:
            assert time.monotonic() < deadline, f"{value!r} not consumed; seen {seen}"
            for m in consumer.consume(num_messages=100, timeout=0.3):
                assert m.error() is None, m.error()
                seen.append(m.value())

    try:
        consumer.subscribe([topic])
        consume_until(b"before")
        assert served_subject(b.ssl_port, certs.ca)["organizationName"] == "Drover Test"
        # SIGHUP: a new chain for new connections.
        chain, key = certs.issue(f"renewed-{b.ssl_port}", "/O=Renewed/CN=localhost", kind="server")
        replace(b.key, key)
        replace(b.chain, chain)
        b.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while served_subject(b.ssl_port, certs.ca)["organizationName"] != "Renewed":
            assert time.monotonic() < deadline, "SIGHUP did not reload the certificate"
            time.sleep(0.1)
        ck_produce(None, topic, [Msg(None, b"after-sighup")], producer=producer)
        consume_until(b"after-sighup")
        # The admin call: another chain.
        chain, key = certs.issue(f"again-{b.ssl_port}", "/O=Again/CN=localhost", kind="server")
        replace(b.key, key)
        replace(b.chain, chain)
        req = urllib.request.Request(f"{b.admin_url}/v1/tls/reload", method="POST", data=b"",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            outcome = json.load(resp)
        assert all(o["reloaded"] for o in outcome["listeners"]), outcome
        assert {o["listener"] for o in outcome["listeners"]} == {"SSL", "MTLS"}
        assert served_subject(b.ssl_port, certs.ca)["organizationName"] == "Again"
        # A reload that fails (a key that is not PEM) keeps the chain in use.
        b.key.write_text("not a key\n")
        req = urllib.request.Request(f"{b.admin_url}/v1/tls/reload", method="POST", data=b"",
                                     headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as failed:
            urllib.request.urlopen(req, timeout=10)
        assert failed.value.code == 500
        body = json.load(failed.value)
        assert not any(o["reloaded"] for o in body["listeners"])
        assert "private_key" in body["listeners"][0]["error"]
        assert served_subject(b.ssl_port, certs.ca)["organizationName"] == "Again"
        # The consumer that connected before all this is still served.
        ck_produce(None, topic, [Msg(None, b"after-admin")], producer=producer)
        consume_until(b"after-admin")
    finally:
        consumer.close()
    m = metrics(b)
    assert m['drover_tls_reloads_total{outcome="reloaded"}'] == 4, m
    assert m['drover_tls_reloads_total{outcome="failed"}'] == 2, m
    b.assert_alive()


def test_drover_consume_over_ssl_and_mtls(tls_broker):
    """The native connector (drover-client, issue 29 item 5) over TLS: the SSL listener
    with the CA only, the mTLS listener with alice's certificate too."""
    b = tls_broker
    topic = unique_topic("tls-native")
    msgs = [Msg(None, b"tn-%02d" % i) for i in range(10)]
    ck_produce(None, topic, msgs, producer=ck_producer(b, **ck_ssl(b)))
    alice = ["--ssl-certificate-location", str(b.certs.alice[0]),
             "--ssl-key-location", str(b.certs.alice[1])]
    for name, boot, extra in (("ssl", b.ssl_bootstrap, []), ("mtls", b.mtls_bootstrap, alice)):
        r = subprocess.run(
            [str(conftest.drover_bin()), "consume", "--brokers", boot, "--group",
             f"tls-native-{name}", "--topic", topic, "--format", "values", "--max-messages",
             "10", "--security-protocol", "SSL", "--ssl-ca-location", str(b.certs.ca),
             *extra], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr[-3000:]
        assert sorted(r.stdout.split()) == sorted(m.value.decode() for m in msgs), r.stdout
    assert "principal=User:ALICE@ENG" in b.all_logs()
    assert "-----BEGIN" not in b.all_logs()
