"""SASL on the listeners (issue 29 item 3; docs/security.md, "SASL/SCRAM"): brokers with
a PLAINTEXT listener (for the set-up and the checks), a SASL_SSL listener (certificates
made here with the openssl CLI, tls_testlib) and a SASL_PLAINTEXT listener; SCRAM
credentials made before the clients connect, offline with `drover admin users` and
through AlterUserScramCredentials.

Real clients authenticate and work: confluent-kafka, kafka-python, kafkajs and kcat
produce and consume in groups over SASL_SSL with SCRAM-SHA-512; aiokafka over
SASL_PLAINTEXT with SCRAM-SHA-256; a KIP-848 group and a transactional producer over
SASL_SSL. Refused, each with its error while an honest client keeps producing: a wrong
password and an unknown user (the same answer), a mechanism not offered, PLAIN on
SASL_PLAINTEXT (unless `plain_on_plaintext`), a request after the session expired
(KIP-368, while librdkafka re-authenticates in time), re-authentication as another
user. A Produce (or a native request) before authenticating closes the connection
without an answer and writes nothing; after authenticating, native requests are served
on the connection; off SASL listeners the SASL requests are ILLEGAL_SASL_STATE.
`drover consume` (drover-client) consumes in a native group over SASL_SSL and
SASL_PLAINTEXT. 1,000 failed authentications from one address
while an honest client keeps connecting and producing."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import socket
import ssl
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

import conftest
from conftest import (Broker, free_port, install_plugins, start_or_fail,
                      stop_and_show_logs)
from drover_testlib import (Msg, RawConn, ck_consume, ck_consumer, ck_create_topic,
                            ck_produce, ck_producer, ck_watermarks, frame, http_get,
                            kcat_path, kp_consumer, kp_producer, kstr, produce_v3_request,
                            record_batch, request_header, unique_topic)
from kafka_groups_testlib import PLUGIN_LIBS, group_config
from tls_testlib import OPENSSL, Certs, ConfigListenersBroker

pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl CLI is needed")

PASSWORDS = {"alice": "alice-pw-Tr0ub4dor", "bob": "bob-pw-c0rrect-h0rse"}
NODE_MODULES = Path(__file__).resolve().parents[2] / "target" / "test-node" / "node_modules"
TIMEOUT = 30
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 18, 17, 36, 3


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    c = Certs(tmp_path_factory.mktemp("sasl-certs"))
    c.broker = c.issue("broker", "/O=Drover Test/CN=localhost", kind="server")
    return c


# ---------------------------------------------------------------------------------
# A broker with PLAINTEXT, SASL_SSL and SASL_PLAINTEXT listeners
# ---------------------------------------------------------------------------------
class SaslBroker(ConfigListenersBroker):
    """PLAINTEXT at `port` (set-up and checks), SASL_SSL at `ssl_port`, SASL_PLAINTEXT
    at `plain_port`, the coordinator and the assignors installed, `sasl` lines in
    `[sasl]` (PLAIN is offered besides SCRAM)."""

    def __init__(self, workdir: Path, certs: Certs, sasl: str = ""):
        super().__init__(workdir)
        self.certs = certs
        self.ssl_port = free_port()
        self.plain_port = free_port()
        self.config_path = workdir / "drover.toml"
        self.config_path.write_text(group_config() + f"""
[server]
listeners = ["PLAINTEXT://127.0.0.1:{self.port}", "SASL_SSL://127.0.0.1:{self.ssl_port}",
             "SASL_PLAINTEXT://127.0.0.1:{self.plain_port}"]

[server.ssl]
certificate_chain = "{certs.broker[0]}"
private_key = "{certs.broker[1]}"

[sasl]
mechanisms = ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]
{sasl}
""")

    @property
    def ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"

    @property
    def plain_bootstrap(self) -> str:
        return f"127.0.0.1:{self.plain_port}"


def users_cli(*args: str, password: str) -> None:
    r = subprocess.run([str(conftest.drover_bin()), "admin", "users", *args],
                       input=password.encode() + b"\n", capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors="replace")


@pytest.fixture
def sasl_broker_factory(tmp_path, request, certs, monkeypatch):
    """make(sasl="") -> a started SaslBroker whose users are alice (SCRAM-SHA-512, made
    offline with `drover admin users`, and SCRAM-SHA-256) and bob (SCRAM-SHA-512), the
    last two through AlterUserScramCredentials. Its log shows each SASL principal."""
    monkeypatch.setenv("DROVER_TEST_RUST_LOG", "info,drover_host::server::connection=debug")
    made: list[SaslBroker] = []

    def make(sasl: str = "") -> SaslBroker:
        b = SaslBroker(tmp_path / f"broker{len(made)}", certs, sasl)
        made.append(b)
        install_plugins(b, PLUGIN_LIBS)
        users_cli("--data-dir", str(b.data_dir), "add", "alice", "--mechanism",
                  "SCRAM-SHA-512", "--iterations", "4096", password=PASSWORDS["alice"])
        start_or_fail(b)
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        upserts = [
            UserScramCredentialUpsertion(
                "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                PASSWORDS["alice"].encode()),
            UserScramCredentialUpsertion(
                "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                PASSWORDS["bob"].encode()),
        ]
        for f in admin.alter_user_scram_credentials(upserts, request_timeout=TIMEOUT).values():
            f.result(timeout=TIMEOUT)
        return b

    yield make
    stop_and_show_logs(request, made)


@pytest.fixture
def sasl_broker(sasl_broker_factory) -> SaslBroker:
    return sasl_broker_factory()


def assert_no_secrets(b: SaslBroker) -> None:
    logs = b.all_logs()
    for pw in PASSWORDS.values():
        assert pw not in logs


# ---------------------------------------------------------------------------------
# Client settings
# ---------------------------------------------------------------------------------
def ck_sasl(b: SaslBroker, user: str = "alice", *, mechanism: str = "SCRAM-SHA-512",
            tls: bool = True, password: str | None = None, **extra) -> dict:
    conf = {"bootstrap.servers": b.ssl_bootstrap if tls else b.plain_bootstrap,
            "security.protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user,
            "sasl.password": PASSWORDS.get(user, "x") if password is None else password}
    if tls:
        conf["ssl.ca.location"] = str(b.certs.ca)
    conf.update(extra)
    return conf


def kcat_sasl(b: SaslBroker, user: str = "alice") -> list[str]:
    return ["-b", b.ssl_bootstrap, "-X", "security.protocol=SASL_SSL",
            "-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", f"sasl.username={user}",
            "-X", f"sasl.password={PASSWORDS[user]}", "-X", f"ssl.ca.location={b.certs.ca}",
            "-X", "socket.timeout.ms=10000", "-m", "20"]


def kcat_librdkafka(d: Path) -> dict:
    """An environment in which kcat loads the librdkafka confluent-kafka bundles (2.16).
    librdkafka before 2.6.1 sends a wrong nonce in SCRAM's client-final message
    (confluentinc/librdkafka#4895), which Kafka 4 refuses since CVE-2024-56128 and so
    does Drover; Debian bookworm's kcat 1.7.1 links librdkafka 2.0.2."""
    import confluent_kafka
    libs = Path(confluent_kafka.__file__).resolve().parent.parent / "confluent_kafka.libs"
    lib = next(libs.glob("librdkafka*.so.1"))
    d.mkdir(parents=True, exist_ok=True)
    (d / "librdkafka.so.1").symlink_to(lib)
    return dict(os.environ, LD_LIBRARY_PATH=str(d))


def run_kcat(args: list[str], *, input: bytes | None = None, timeout: float = 60,
             env: dict | None = None, ok: bool = True):
    r = subprocess.run([kcat_path(), *args], input=input, capture_output=True, timeout=timeout,
                       env=env)
    assert (r.returncode == 0) == ok, (f"kcat exited {r.returncode}\n"
                                       f"{r.stderr.decode(errors='replace')[-2000:]}")
    return r


def ck_group_consume(b: SaslBroker, conf: dict, topic: str, n: int, group: str,
                     **extra) -> list[bytes]:
    c = ck_consumer(b, **{**conf, "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": True, "enable.auto.offset.store": True,
                             **extra})
    got: list[bytes] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(got) < n:
            assert time.monotonic() < deadline, f"group {group}: {len(got)} of {n} records"
            for m in c.consume(num_messages=100, timeout=0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
        c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def produce_one(b: SaslBroker, topic: str, value: bytes, **conf) -> None:
    """One record through a new confluent-kafka producer (a new connection, a new
    authentication)."""
    ck_produce(None, topic, [Msg(None, value)], producer=ck_producer(b, **ck_sasl(b, **conf)),
               flush_timeout=TIMEOUT)


def auth_error(b: SaslBroker, conf: dict, timeout: float = 15) -> KafkaError:
    """The first authentication error a confluent-kafka producer with `conf` reports."""
    errors: list[KafkaError] = []
    p = Producer({**ck_sasl(b), **conf, "error_cb": errors.append,
                  "reconnect.backoff.ms": 2000, "reconnect.backoff.max.ms": 5000})
    try:
        deadline = time.monotonic() + timeout
        while not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            assert time.monotonic() < deadline, f"no authentication error: {errors}"
            p.poll(0.1)
    finally:
        del p
    return next(e for e in errors if e.code() == KafkaError._AUTHENTICATION)


def metrics(b: Broker, prefix: str) -> dict[str, float]:
    status, _, body = http_get(f"{b.admin_url}/metrics")
    assert status == 200
    out = {}
    for line in body.splitlines():
        if line.startswith(prefix):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def closed_metric(b: Broker, reason: str) -> float:
    return metrics(b, "drover_connections_closed_by_broker").get(
        f'drover_connections_closed_by_broker_total{{reason="{reason}"}}', 0)


def sasl_metric(b: Broker, mechanism: str, outcome: str) -> float:
    return metrics(b, "drover_sasl").get(
        f'drover_sasl_authentications_total{{mechanism="{mechanism}",outcome="{outcome}"}}', 0)


# ---------------------------------------------------------------------------------
# SASL by hand
# ---------------------------------------------------------------------------------
class SaslConn(RawConn):
    """A raw connection to a SASL listener (TLS when `ca` is given, from `source` when
    given), with SaslHandshake v1 and SaslAuthenticate v1."""

    def __init__(self, port: int, *, ca: Path | None = None, source: str | None = None,
                 timeout: float = 10):
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                     source_address=(source, 0) if source else None)
        if ca is not None:
            s = ssl.create_default_context(cafile=str(ca)).wrap_socket(
                s, server_hostname="localhost")
        s.settimeout(timeout)
        self.sock = s
        self.corr = 0

    def handshake(self, mechanism: str) -> tuple[int, list[str]]:
        body = self.recv_response(self.request(SASL_HANDSHAKE, 1, kstr(mechanism)))
        err, n = struct.unpack_from(">hi", body, 0)
        pos, names = 6, []
        for _ in range(n):
            (ln,) = struct.unpack_from(">h", body, pos)
            names.append(body[pos + 2:pos + 2 + ln].decode())
            pos += 2 + ln
        return err, names

    def authenticate(self, token: bytes) -> tuple[int, str | None, bytes, int]:
        """-> (error, message, auth bytes, session lifetime ms)."""
        body = self.recv_response(self.request(SASL_AUTHENTICATE, 1,
                                               struct.pack(">i", len(token)) + token))
        (err, ln) = struct.unpack_from(">hh", body, 0)
        pos = 4
        message = None
        if ln >= 0:
            message = body[pos:pos + ln].decode()
            pos += ln
        (bl,) = struct.unpack_from(">i", body, pos)
        auth = body[pos + 4:pos + 4 + bl]
        (lifetime,) = struct.unpack_from(">q", body, pos + 4 + bl)
        return err, message, auth, lifetime

    def plain(self, user: str, password: str) -> tuple[int, str | None, bytes, int]:
        err, _ = self.handshake("PLAIN")
        assert err == 0, f"PLAIN handshake: error {err}"
        return self.authenticate(b"\0" + user.encode() + b"\0" + password.encode())

    def metadata_answered(self) -> bool:
        """Metadata v1 for no topic: whether it is answered."""
        self.request(METADATA, 1, struct.pack(">i", 0))
        try:
            return len(self.recv_frame()) > 0
        except (EOFError, ConnectionError, ssl.SSLError):
            return False


def closed_without_answer(c: RawConn, timeout: float = 5) -> None:
    """The broker closes `c` without sending a byte."""
    c.sock.settimeout(timeout)
    try:
        got = c.sock.recv(100)
    except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
        return
    assert got == b"", f"the broker answered {got[:30]!r}"


def scram_failure(port: int, user: str, source: str) -> int:
    """One SCRAM-SHA-512 authentication with a wrong proof from `source`; the error code
    it ends with (58, or 0 when the broker let it through)."""
    with SaslConn(port, source=source) as c:
        err, _ = c.handshake("SCRAM-SHA-512")
        assert err == 0
        err, _, first, _ = c.authenticate(b"n,,n=" + user.encode() + b",r=fyko+d2lbbFgONRv9qkxdawL")
        if err:
            return err
        nonce = first.split(b",")[0][2:]
        proof = base64.b64encode(b"\0" * 64)
        err, _, _, _ = c.authenticate(b"c=biws,r=" + nonce + b",p=" + proof)
        return err


# ---------------------------------------------------------------------------------
# Every client over SASL
# ---------------------------------------------------------------------------------
def test_confluent_kafka_and_kcat_scram_sha_512_over_sasl_ssl(sasl_broker, tmp_path):
    b = sasl_broker
    topic = unique_topic("sasl-ck")
    msgs = [Msg(b"k%d" % i, b"ck-%03d" % i) for i in range(40)]
    ck_produce(None, topic, msgs, producer=ck_producer(b, **ck_sasl(b)))
    assert sorted(ck_group_consume(b, ck_sasl(b, "bob"), topic, 40, "sasl-ck")) == \
        sorted(m.value for m in msgs)
    env = kcat_librdkafka(tmp_path / "rdkafka")
    run_kcat([*kcat_sasl(b), "-P", "-t", topic], input=b"kcat-1\nkcat-2\n", env=env)
    r = run_kcat([*kcat_sasl(b, "bob"), "-G", "sasl-kcat", "-o", "beginning", "-c", "42",
                  "-f", "%s\\n", "-q", topic], env=env)
    assert sorted(r.stdout.split()) == sorted([m.value for m in msgs] + [b"kcat-1", b"kcat-2"])
    log = b.all_logs()
    assert "principal=User:alice" in log and "principal=User:bob" in log
    assert sasl_metric(b, "scram-sha-512", "success") >= 4
    assert sasl_metric(b, "scram-sha-512", "failure") == 0
    # kcat on its own librdkafka: before 2.6.1 its client-final nonce is wrong, and the
    # broker checks it (RFC 5802; Kafka 4 since CVE-2024-56128).
    version = subprocess.run([kcat_path(), "-V"], capture_output=True, text=True).stdout
    own = tuple(int(x) for x in version.split("librdkafka ")[1].split()[0].split(".")[:3])
    if own < (2, 6, 1):
        r = run_kcat([*kcat_sasl(b), "-m", "3", "-L"], ok=False)
        assert b"invalid credentials with SASL mechanism SCRAM-SHA-512" in r.stderr
    assert_no_secrets(b)


def test_kafka_python_scram_sha_512_over_sasl_ssl(sasl_broker):
    b = sasl_broker
    topic = unique_topic("sasl-kp")
    conf = dict(bootstrap_servers=b.ssl_bootstrap, security_protocol="SASL_SSL",
                sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice",
                sasl_plain_password=PASSWORDS["alice"], ssl_cafile=str(b.certs.ca))
    p = kp_producer(b, **conf)
    try:
        for i in range(30):
            p.send(topic, key=b"k", value=b"kp-%02d" % i)
        p.flush(timeout=TIMEOUT)
    finally:
        p.close(timeout=10)
    c = kp_consumer(b, **conf, group_id="sasl-kp", auto_offset_reset="earliest")
    got: list[bytes] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(got) < 30:
            assert time.monotonic() < deadline, f"{len(got)} of 30 records"
            for recs in c.poll(timeout_ms=500).values():
                got += [r.value for r in recs]
        c.commit()
    finally:
        c.close()
    assert sorted(got) == [b"kp-%02d" % i for i in range(30)]


def test_kafkajs_scram_sha_512_over_sasl_ssl(sasl_broker):
    node = shutil.which("node")
    if node is None or not (NODE_MODULES / "kafkajs" / "package.json").exists():
        pytest.skip("Node.js or kafkajs is not installed (scripts/install-test-deps.sh)")
    b = sasl_broker
    topic = unique_topic("sasl-kjs")
    ck_create_topic(b, topic, 2)
    env = dict(os.environ, NODE_PATH=str(NODE_MODULES), KAFKAJS_PASSWORD=PASSWORDS["alice"])
    run = subprocess.run([node, str(Path(__file__).with_name("kafkajs_sasl.js")),
                          b.ssl_bootstrap, str(b.certs.ca), "alice", topic, "sasl-kjs", "25"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"kafkajs exited {run.returncode}: {run.stderr[-3000:]}"
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["consumed"] == sorted(f"kjs-{i}" for i in range(25))


def test_aiokafka_scram_sha_256_over_sasl_plaintext(sasl_broker):
    aiokafka = pytest.importorskip("aiokafka")
    b = sasl_broker
    topic = unique_topic("sasl-aio")
    conf = dict(bootstrap_servers=b.plain_bootstrap, security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice",
                sasl_plain_password=PASSWORDS["alice"])

    async def run() -> list[bytes]:
        producer = aiokafka.AIOKafkaProducer(**conf)
        await producer.start()
        try:
            for i in range(20):
                await producer.send_and_wait(topic, b"aio-%02d" % i)
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(topic, group_id="sasl-aio",
                                             auto_offset_reset="earliest", **conf)
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(60):
                async for m in consumer:
                    got.append(m.value)
                    if len(got) == 20:
                        break
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    assert sorted(asyncio.run(run())) == [b"aio-%02d" % i for i in range(20)]
    assert sasl_metric(b, "scram-sha-256", "success") >= 2


def test_kip848_group_and_transactional_producer_over_sasl_ssl(sasl_broker):
    b = sasl_broker
    topic = unique_topic("sasl-848")
    ck_create_topic(b, topic, 2)
    p = ck_producer(b, **ck_sasl(b), **{"transactional.id": unique_topic("sasl-txn"),
                                        "enable.idempotence": True})
    p.init_transactions(TIMEOUT)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=b"committed-%d" % i, partition=i % 2)
    p.commit_transaction(TIMEOUT)
    p.begin_transaction()
    p.produce(topic, value=b"aborted", partition=0)
    p.abort_transaction(TIMEOUT)
    got = ck_group_consume(b, ck_sasl(b, "bob"), topic, 10, "sasl-848",
                           **{"group.protocol": "consumer", "isolation.level": "read_committed"})
    assert sorted(got) == sorted(b"committed-%d" % i for i in range(10))


# ---------------------------------------------------------------------------------
# Refusals, while honest clients keep working
# ---------------------------------------------------------------------------------
def test_wrong_password_unknown_user_and_mechanisms_not_offered_are_refused(sasl_broker):
    b = sasl_broker
    topic = unique_topic("sasl-refused")
    produce_one(b, topic, b"before")
    wrong = auth_error(b, {"sasl.password": "not-alices-password"})
    unknown = auth_error(b, {"sasl.username": "mallory", "sasl.password": "whatever"})
    produce_one(b, topic, b"between")
    # The same answer, naming only the mechanism.
    for e in (wrong, unknown):
        assert ("invalid credentials with SASL mechanism SCRAM-SHA-512" in e.str()), e.str()
        assert "mallory" not in e.str() and "alice" not in e.str()
    # A mechanism the broker does not offer: UNSUPPORTED_SASL_MECHANISM (33) with the
    # offered list, then the connection closes.
    with SaslConn(b.ssl_port, ca=b.certs.ca) as c:
        assert c.handshake("GSSAPI") == (33, ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
        closed_without_answer(c)
    # PLAIN is offered over TLS only: refused on SASL_PLAINTEXT ...
    with SaslConn(b.plain_port) as c:
        assert c.handshake("PLAIN") == (33, ["SCRAM-SHA-512", "SCRAM-SHA-256"])
    e = auth_error(b, {"sasl.mechanism": "PLAIN", "bootstrap.servers": b.plain_bootstrap,
                       "security.protocol": "SASL_PLAINTEXT"})
    assert "PLAIN" in e.str() and "SCRAM-SHA-512,SCRAM-SHA-256" in e.str(), e.str()
    # ... and works over SASL_SSL (checked against the SCRAM credential, on the
    # blocking pool).
    produce_one(b, topic, b"plain", mechanism="PLAIN")
    produce_one(b, topic, b"after")
    wm = ck_watermarks(b, topic, [0])
    assert wm[0][1] == 4, wm
    assert sasl_metric(b, "scram-sha-512", "failure") >= 2
    assert sasl_metric(b, "plain", "success") >= 1
    assert closed_metric(b, "sasl_unsupported_mechanism") >= 2
    assert "not-alices-password" not in b.all_logs()
    assert_no_secrets(b)


def test_plain_on_plaintext_when_allowed(sasl_broker_factory):
    b = sasl_broker_factory("plain_on_plaintext = true")
    with SaslConn(b.plain_port) as c:
        err, message, _, _ = c.plain("bob", PASSWORDS["bob"])
        assert err == 0 and not message, (err, message)
        assert c.metadata_answered()
    with SaslConn(b.plain_port) as c:
        err, message, _, _ = c.plain("bob", "guess")
        assert err == 58 and message.endswith("with SASL mechanism PLAIN"), (err, message)
        closed_without_answer(c)


def test_an_expired_session_may_only_reauthenticate(sasl_broker_factory):
    b = sasl_broker_factory("connections_max_reauth_ms = 1500")
    topic = unique_topic("sasl-reauth")
    # librdkafka re-authenticates before its session ends (KIP-368) and keeps producing.
    errors: list = []
    p = ck_producer(b, **ck_sasl(b), error_cb=errors.append)
    started = time.monotonic()
    n = 0
    while time.monotonic() - started < 4:
        ck_produce(None, topic, [Msg(None, b"r-%d" % n)], producer=p, flush_timeout=TIMEOUT)
        n += 1
        time.sleep(0.2)
    assert not errors, errors
    # The initial authentications and at least two re-authentications.
    assert sasl_metric(b, "scram-sha-512", "success") >= 3
    # A client that lets its session expire: its next request closes the connection.
    with SaslConn(b.ssl_port, ca=b.certs.ca) as c:
        err, _, _, lifetime = c.plain("alice", PASSWORDS["alice"])
        assert (err, lifetime) == (0, 1500)
        assert c.metadata_answered()
        time.sleep(1.7)
        assert not c.metadata_answered()
    assert closed_metric(b, "sasl_session_expired") >= 1
    # Re-authenticating in time renews the session; as another user it fails.
    with SaslConn(b.ssl_port, ca=b.certs.ca) as c:
        assert c.plain("alice", PASSWORDS["alice"])[0] == 0
        time.sleep(0.8)
        assert c.plain("alice", PASSWORDS["alice"])[0] == 0
        time.sleep(0.9)
        assert c.metadata_answered()
        err, message, _, _ = c.plain("bob", PASSWORDS["bob"])
        assert err == 58, (err, message)
        closed_without_answer(c)
    ck_produce(None, topic, [Msg(None, b"last")], producer=p, flush_timeout=TIMEOUT)
    assert ck_watermarks(b, topic, [0])[0][1] == n + 1


def test_a_request_before_authenticating_closes_and_writes_nothing(sasl_broker):
    b = sasl_broker
    topic = unique_topic("sasl-early")
    ck_create_topic(b, topic, 1)
    produce = frame(request_header(0, 3, 1)
                    + produce_v3_request(topic, 0, record_batch([(None, b"sneaky")])))
    # A Produce first, on either listener.
    for port, ca in ((b.plain_port, None), (b.ssl_port, b.certs.ca)):
        with SaslConn(port, ca=ca) as c:
            c.send_raw(produce)
            closed_without_answer(c)
    # ApiVersions is answered; a Produce after it, or after the handshake but before
    # the authentication, is not.
    with SaslConn(b.plain_port) as c:
        c.send_raw(frame(request_header(API_VERSIONS, 0, 1)))
        assert len(c.recv_frame()) > 10
        c.send_raw(produce)
        closed_without_answer(c)
    with SaslConn(b.ssl_port, ca=b.certs.ca) as c:
        assert c.handshake("SCRAM-SHA-512")[0] == 0
        c.send_raw(produce)
        closed_without_answer(c)
    # A native coordinator request (RegisterConsumer, API key 20000) too.
    with SaslConn(b.plain_port) as c:
        c.send_raw(frame(request_header(20000, 0, 1) + kstr("g") + kstr("c")))
        closed_without_answer(c)
    assert closed_metric(b, "sasl_unauthenticated_request") == 5
    # Authenticated first, the same native request is served on the same connection.
    import native_protocol as native
    authed = SaslConn(b.ssl_port, ca=b.certs.ca)
    assert authed.plain("bob", PASSWORDS["bob"])[0] == 0
    n = native.Conn("127.0.0.1", b.port)
    n.sock.close()
    n.sock = authed.sock
    try:
        resp = n.request(native.DescribeGroupsRequest(["sasl-native-group"]))
        assert [g.group_id for g in resp.groups] == ["sasl-native-group"], resp
    finally:
        n.close()
    # On the PLAINTEXT listener the SASL requests are answered ILLEGAL_SASL_STATE (34),
    # as Kafka does, and the connection goes on.
    with RawConn(b) as c:
        body = c.recv_response(c.request(SASL_HANDSHAKE, 1, kstr("SCRAM-SHA-512")))
        assert struct.unpack_from(">h", body, 0)[0] == 34
        c.send_raw(frame(request_header(API_VERSIONS, 0, 9)))
        assert len(c.recv_frame()) > 10
    # Nothing was written: ListOffsets through the PLAINTEXT listener, and a consumer.
    assert ck_watermarks(b, topic, [0]) == {0: (0, 0)}
    ck_produce(None, topic, [Msg(None, b"honest")], producer=ck_producer(b, **ck_sasl(b)))
    got = ck_consume(b, topic, {0: 1}, consumer=ck_consumer(b, **ck_sasl(b)))
    assert [r.value for r in got[0]] == [b"honest"]


def test_a_thousand_failures_from_one_address_while_an_honest_client_connects(sasl_broker):
    b = sasl_broker
    topic = unique_topic("sasl-flood")
    attempts, workers = 1000, 25
    results: list[int] = []
    lock = threading.Lock()

    def attack(count: int) -> None:
        for _ in range(count):
            err = scram_failure(b.plain_port, "mallory", source="127.0.0.2")
            with lock:
                results.append(err)

    threads = [threading.Thread(target=attack, args=(attempts // workers,), daemon=True)
               for _ in range(workers)]
    started = time.monotonic()
    for t in threads:
        t.start()
    # The honest client (from 127.0.0.1) connects anew and produces, again and again.
    honest = 0
    while any(t.is_alive() for t in threads):
        produce_one(b, topic, b"honest-%d" % honest)
        honest += 1
    for t in threads:
        t.join(60)
    elapsed = time.monotonic() - started
    assert len(results) == attempts and set(results) == {58}, set(results)
    assert honest >= 3, honest
    assert ck_watermarks(b, topic, [0])[0][1] == honest
    failed = sasl_metric(b, "scram-sha-512", "failure")
    limited = sasl_metric(b, "scram-sha-512", "rate_limited")
    assert failed + limited == attempts, (failed, limited)
    # The address's budget (30, refilled at 30 a minute) ran out early: the rest were
    # refused unchecked.
    assert failed <= 30 + elapsed / 2 + 2, (failed, limited, elapsed)
    assert sasl_metric(b, "scram-sha-512", "success") >= honest
    b.assert_alive()


# ---------------------------------------------------------------------------------
# The native protocol's connector (issue 29 item 5)
# ---------------------------------------------------------------------------------
def test_drover_consume_over_sasl_ssl_and_sasl_plaintext(sasl_broker, tmp_path):
    b = sasl_broker
    topic = unique_topic("sasl-native")
    ck_create_topic(b, topic, 2)
    msgs = [Msg(None, b"native-%02d" % i) for i in range(20)]
    ck_produce(None, topic, msgs, producer=ck_producer(b, **ck_sasl(b)))
    files = {}
    for user, password in PASSWORDS.items():
        files[user] = tmp_path / f"{user}.pw"
        files[user].write_text(password + "\n")
        os.chmod(files[user], 0o600)
    for protocol, port, mechanism, user in (
            ("SASL_SSL", b.ssl_port, "SCRAM-SHA-512", "bob"),
            ("SASL_PLAINTEXT", b.plain_port, "SCRAM-SHA-256", "alice")):
        args = [str(conftest.drover_bin()), "consume", "--brokers", f"127.0.0.1:{port}",
                "--group", f"native-{protocol}", "--topic", topic, "--format", "values",
                "--max-messages", "20", "--security-protocol", protocol,
                "--sasl-mechanism", mechanism, "--sasl-username", user,
                "--sasl-password-file", str(files[user])]
        if protocol == "SASL_SSL":
            args += ["--ssl-ca-location", str(b.certs.ca)]
        r = subprocess.run(args, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr[-3000:]
        assert sorted(r.stdout.split()) == sorted(m.value.decode() for m in msgs), r.stdout
        assert PASSWORDS["alice"] not in r.stderr and PASSWORDS["bob"] not in r.stderr
    log = b.all_logs()
    assert "principal=User:bob" in log and "principal=User:alice" in log
    assert sasl_metric(b, "scram-sha-256", "success") >= 2


def test_clients_keep_working_across_reauthentications(sasl_broker_factory, tmp_path):
    """KIP-368 with a short session lifetime: `drover consume` (drover-client
    re-authenticates its bootstrap, fetch and offset connections before the lifetime
    the broker answered runs out; its coordinator channel, which sends no requests, is
    renewed by the broker while bob's credential is unchanged) and a confluent-kafka
    producer and group consumer (librdkafka re-authenticates from the same lifetime)
    keep producing and consuming over several lifetimes, and no connection is closed
    for an expired session."""
    b = sasl_broker_factory("connections_max_reauth_ms = 2000")
    topic = unique_topic("sasl-reauth-clients")
    ck_create_topic(b, topic, 2)
    pw = tmp_path / "bob.pw"
    pw.write_text(PASSWORDS["bob"] + "\n")
    os.chmod(pw, 0o600)
    total = 36
    native = subprocess.Popen(
        [str(conftest.drover_bin()), "consume", "--brokers", b.ssl_bootstrap,
         "--group", "reauth-native", "--topic", topic, "--format", "values",
         "--max-messages", str(total), "--security-protocol", "SASL_SSL",
         "--ssl-ca-location", str(b.certs.ca), "--sasl-mechanism", "SCRAM-SHA-512",
         "--sasl-username", "bob", "--sasl-password-file", str(pw)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, RUST_LOG="drover_client=debug"))
    errors: list = []
    p = ck_producer(b, **ck_sasl(b), error_cb=errors.append)
    c = ck_consumer(b, **ck_sasl(b, "bob"), **{"group.id": "reauth-ck",
                                               "auto.offset.reset": "earliest"},
                    error_cb=errors.append)
    got: list[bytes] = []
    try:
        c.subscribe([topic])
        # Three records a second for 12 s: six session lifetimes.
        for i in range(total):
            ck_produce(None, topic, [Msg(None, b"reauth-%02d" % i)], producer=p,
                       flush_timeout=TIMEOUT)
            for m in c.consume(num_messages=100, timeout=0.33):
                assert m.error() is None, m.error()
                got.append(m.value())
        deadline = time.monotonic() + TIMEOUT
        while len(got) < total and time.monotonic() < deadline:
            got += [m.value() for m in c.consume(num_messages=100, timeout=0.5)]
        out, err = native.communicate(timeout=TIMEOUT)
    finally:
        c.close()
        if native.poll() is None:
            native.kill()
    want = sorted(b"reauth-%02d" % i for i in range(total))
    assert sorted(got) == want
    assert native.returncode == 0, err[-3000:]
    assert sorted(out.split()) == sorted(v.decode() for v in want), out
    assert not errors, errors
    # The native consumer's connections re-authenticated, its channel was renewed, and
    # nothing was closed for an expired session.
    assert "re-authenticated (KIP-368)" in err, err[-3000:]
    assert PASSWORDS["bob"] not in err
    assert closed_metric(b, "sasl_session_expired") == 0
    assert sasl_metric(b, "scram-sha-512", "channel_renewed") >= 1
    # Each client's connections authenticated several times over.
    assert sasl_metric(b, "scram-sha-512", "success") >= 12
    assert_no_secrets(b)


def test_a_large_frame_before_authenticating_closes_without_being_read(sasl_broker):
    """Before authenticating, a frame may be at most 512 KiB (Kafka's
    sasl.server.max.receive.size): one announcing more is refused at its size field,
    before the broker reads (and holds) its body, on the SASL_PLAINTEXT and SASL_SSL
    listeners alike; other clients are served meanwhile."""
    b = sasl_broker
    before = metrics(b, "drover_frames_rejected_total").get(
        'drover_frames_rejected_total{reason="bad_size"}', 0)
    for port, ca in ((b.plain_port, None), (b.ssl_port, b.certs.ca)):
        with SaslConn(port, ca=ca) as c:
            # A SaslAuthenticate announcing 100 MiB, and only its first bytes sent.
            c.send_raw(struct.pack(">i", 100 << 20) + request_header(SASL_AUTHENTICATE, 1, 1))
            closed_without_answer(c)
        with SaslConn(port, ca=ca) as c:
            assert c.handshake("SCRAM-SHA-512")[0] == 0
            c.send_raw(struct.pack(">i", 512 * 1024 + 1) + request_header(SASL_AUTHENTICATE, 1, 2))
            closed_without_answer(c)
    after = metrics(b, "drover_frames_rejected_total").get(
        'drover_frames_rejected_total{reason="bad_size"}', 0)
    assert after - before == 4, (before, after)
    # An honest client authenticates and is served.
    with SaslConn(b.ssl_port, ca=b.certs.ca) as c:
        assert c.plain("bob", PASSWORDS["bob"])[0] == 0
        assert c.metadata_answered()
