"""SASL in cluster mode (issue 29 item 4; docs/security.md, "What is stored, and where"):
two brokers against a real ZooKeeper, each with a PLAINTEXT listener (set-up, checks)
and a SASL_SSL listener. SCRAM credentials altered through confluent-kafka's
AdminClient on broker A authenticate clients on broker B's SASL_SSL listener (B
follows the credentials' ZooKeeper node); a restart of B keeps them; deleting the
credential through A makes B refuse it. A broker that cannot read the credentials'
node (here: its ACL lets only another identity read it) has loaded no credentials:
it closes each SaslHandshake without an answer (retriable for clients, counted as
`sasl_credentials_not_loaded`), and authenticates as soon as it can read the node."""

from __future__ import annotations

import secrets
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion,
                                   UserScramCredentialUpsertion)

from cluster_testlib import ZooKeeper, wait_until
from conftest import stop_and_show_logs
from drover_testlib import (Msg, ck_consume, ck_consumer, ck_create_topic, ck_produce,
                            ck_producer, ck_watermarks, http_get, kstr,
                            unique_topic)
from test_sasl import SaslConn, closed_metric, closed_without_answer, sasl_metric
from test_zookeeper_auth import zk_cli
from tls_testlib import OPENSSL, Certs, ConfigListenersBroker

pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl CLI is needed")

TIMEOUT = 20
PASSWORD = "carol-pw-" + secrets.token_urlsafe(12)


class ClusterSaslBroker(ConfigListenersBroker):
    """Broker `broker_id` of the cluster in `chroot`: PLAINTEXT at `port`, SASL_SSL
    (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN) at `ssl_port`."""

    def __init__(self, workdir: Path, certs: Certs, zk: ZooKeeper, chroot: str,
                 broker_id: int):
        super().__init__(workdir)
        self.certs = certs
        self.ssl_port = ssl_port = self.free_other_port()
        self.config_path = workdir / "drover.toml"
        self.config_path.write_text(f"""
[server]
broker_id = {broker_id}
listeners = ["PLAINTEXT://127.0.0.1:{self.port}", "SASL_SSL://127.0.0.1:{ssl_port}"]

[server.ssl]
certificate_chain = "{certs.broker[0]}"
private_key = "{certs.broker[1]}"

[sasl]
mechanisms = ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]

[zookeeper]
enabled = true
connect = "{zk.connect}"
chroot = "{chroot}"
session_timeout_ms = 3000
""")

    def free_other_port(self) -> int:
        from conftest import free_port
        while (p := free_port()) in (self.port, self.admin_port):
            pass
        return p

    @property
    def ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    c = Certs(tmp_path_factory.mktemp("sasl-cluster-certs"))
    c.broker = c.issue("broker", "/O=Drover Test/CN=localhost", kind="server")
    return c


@pytest.fixture
def cluster(tmp_path, certs, zookeeper, request):
    """make(n_started) -> the brokers 1..n of one chroot, each started once all are
    made (`start=False` leaves them for the test)."""
    made: list[ClusterSaslBroker] = []
    chroot = f"/drover-sasl-{uuid.uuid4().hex[:8]}"

    def make(broker_id: int, *, start: bool = True) -> ClusterSaslBroker:
        b = ClusterSaslBroker(tmp_path / f"broker{broker_id}", certs, zookeeper, chroot,
                              broker_id)
        made.append(b)
        if start:
            b.start()
        return b

    make.chroot = chroot
    yield make
    stop_and_show_logs(request, made)


def alter(b: ClusterSaslBroker, alteration) -> None:
    """One alteration through `b`'s PLAINTEXT listener (confluent-kafka's AdminClient)."""
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in a.alter_user_scram_credentials([alteration], request_timeout=TIMEOUT).values():
        f.result(timeout=TIMEOUT)


def upsert_carol(mechanism=ScramMechanism.SCRAM_SHA_512) -> UserScramCredentialUpsertion:
    return UserScramCredentialUpsertion("carol", ScramCredentialInfo(mechanism, 8192),
                                        PASSWORD.encode())


def plain_on(b: ClusterSaslBroker) -> int | None:
    """PLAIN as carol on `b`'s SASL_SSL listener (checked against her SCRAM-SHA-512
    credential, on `b` only): 0, 58, or None when `b` closed the connection without an
    answer."""
    with SaslConn(b.ssl_port, ca=b.certs.ca) as c:
        try:
            err, _ = c.handshake("PLAIN")
        except (EOFError, ConnectionError, OSError):
            return None
        assert err == 0, err
        return c.authenticate(b"\0carol\0" + PASSWORD.encode())[0]


def sasl_conf(b: ClusterSaslBroker, **extra) -> dict:
    return {"bootstrap.servers": b.ssl_bootstrap, "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "carol",
            "sasl.password": PASSWORD, "ssl.ca.location": str(b.certs.ca), **extra}


def scram_refused_on(b: ClusterSaslBroker) -> KafkaError:
    """The authentication error a confluent-kafka producer bootstrapping on `b`'s
    SASL_SSL listener reports."""
    errors: list[KafkaError] = []
    p = Producer({**sasl_conf(b), "error_cb": errors.append,
                  "reconnect.backoff.ms": 2000, "reconnect.backoff.max.ms": 5000})
    try:
        wait_until(lambda: p.poll(0.1) is not None and any(
            e.code() == KafkaError._AUTHENTICATION for e in errors), TIMEOUT,
            f"an authentication error from broker {b.ssl_bootstrap} ({errors})")
    finally:
        del p
    return next(e for e in errors if e.code() == KafkaError._AUTHENTICATION)


def registered(brokers, n: int) -> bool:
    import json
    for b in brokers:
        status, _, body = http_get(f"{b.admin_url}/v1/cluster")
        if status != 200 or len(json.loads(body)["view"]["brokers"]) != n:
            return False
    return True


def test_credentials_altered_on_one_broker_authenticate_on_another(cluster):
    a, b = cluster(1), cluster(2)
    wait_until(lambda: registered([a, b], 2), 30, "both brokers registered")
    topic = unique_topic("sasl-cluster")
    ck_create_topic(a, topic, 2)
    alter(a, upsert_carol())
    # Broker B follows the credentials' node: carol authenticates on B's listener ...
    wait_until(lambda: plain_on(b) == 0, TIMEOUT, "carol authenticated on broker B")
    # ... with SCRAM-SHA-512 through a real client, bootstrapping on B (and sent to
    # whichever broker leads each partition, on its SASL_SSL listener).
    msgs = [Msg(None, b"cluster-%02d" % i) for i in range(20)]
    ck_produce(None, topic, msgs, producer=ck_producer(b, **sasl_conf(b)))
    counts = {p: hi for p, (_, hi) in ck_watermarks(a, topic, [0, 1]).items()}
    got = ck_consume(b, topic, counts, consumer=ck_consumer(b, **sasl_conf(b)))
    assert sorted(r.value for p in got.values() for r in p) == sorted(m.value for m in msgs)
    assert sasl_metric(b, "scram-sha-512", "success") >= 1

    # A restart of B keeps them: it reads them back from ZooKeeper.
    b.restart()
    wait_until(lambda: plain_on(b) == 0, TIMEOUT, "carol authenticated on restarted B")
    got = ck_consume(b, topic, counts, consumer=ck_consumer(b, **sasl_conf(b)))
    assert sum(len(p) for p in got.values()) == 20

    # Deleted through A: B refuses carol, with PLAIN and with SCRAM alike.
    alter(a, UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512))
    wait_until(lambda: plain_on(b) == 58, TIMEOUT, "carol refused on broker B")
    e = scram_refused_on(b)
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in e.str(), e.str()
    for x in (a, b):
        assert PASSWORD not in x.all_logs()


def test_a_broker_that_has_not_loaded_credentials_refuses_cleanly(cluster, zookeeper):
    a = cluster(1)
    alter(a, upsert_carol())
    node = f"{cluster.chroot}/config/scram_credentials"
    # Another identity takes the node: from now on only it can read it.
    other = f"other:{secrets.token_urlsafe(12)}"
    out = zk_cli(zookeeper, [f"addauth digest {other}", f"setAcl {node} auth::cdrwa",
                             f"getAcl {node}"])
    assert "'digest,'other:" in out, out
    b = cluster(2)
    wait_until(lambda: registered([a, b], 2), 30, "both brokers registered")
    # B runs (its other listeners serve) but has no credentials: every SaslHandshake
    # is closed without an answer, which clients retry, rather than failed.
    for _ in range(3):
        with SaslConn(b.ssl_port, ca=b.certs.ca) as c:
            c.request(17, 1, kstr("SCRAM-SHA-512"))
            closed_without_answer(c)
    assert closed_metric(b, "sasl_credentials_not_loaded") == 3
    assert sasl_metric(b, "scram-sha-512", "failure") == 0
    assert plain_on(b) is None
    # B says why, naming the node (and nothing secret).
    wait_until(lambda: "/config/scram_credentials: " in b.stderr_text(), TIMEOUT,
               "broker B's warning about the credentials' node")
    # A client started meanwhile keeps retrying, and gets in once B can read the node.
    errors: list[KafkaError] = []
    p = ck_producer(b, **sasl_conf(b), error_cb=errors.append)
    topic = unique_topic("sasl-not-loaded")
    ck_create_topic(a, topic, 1)
    p.produce(topic, b"waited")
    p.poll(1)
    out = zk_cli(zookeeper, [f"addauth digest {other}", f"setAcl {node} world:anyone:cdrwa"])
    wait_until(lambda: plain_on(b) == 0, TIMEOUT, "carol authenticated once B read the node")
    assert p.flush(TIMEOUT) == 0
    # librdkafka saw the closed handshakes as transport failures (it names them
    # "mechanism handshake failed: ... Broker transport failure" and retries), never
    # as refused credentials.
    assert not [e for e in errors if "invalid credentials" in e.str()], errors
    assert any("transport failure" in e.str() for e in errors), errors
    for x in (a, b):
        assert PASSWORD not in x.all_logs()
