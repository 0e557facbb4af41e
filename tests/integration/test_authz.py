"""Authorization (issue 30; docs/security.md, "Authorization"): brokers with the ACL
authorizer (`[authorizer] plugin = "acl"`), a PLAINTEXT listener on loopback for
administration (its anonymous principal is a super user, as security.md recommends)
and a SASL_SSL listener for the applications (alice, bob; SCRAM-SHA-512).

Real clients over SASL_SSL: a producer without Write gets TOPIC_AUTHORIZATION_FAILED
and writes nothing (confluent-kafka, kafka-python, kafkajs); a consumer without Read on
its group gets GROUP_AUTHORIZATION_FAILED (classic and KIP-848); Metadata hides the
topics a principal may not describe; a transactional producer without Write on its id
gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED; PREFIXED ALLOW with a LITERAL DENY inside
it; a super user does everything; ACLs made with the admin client take effect on a
second broker in cluster mode and survive a restart. A panicking authorizer denies
(fails closed) and a rescan that replaces it decides from the next request. Without an
authorizer, DescribeAcls answers SECURITY_DISABLED."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                   AclPermissionType, AdminClient, ResourcePatternType,
                                   ResourceType, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

import conftest
from conftest import free_port, install_plugins, start_or_fail
from drover_testlib import (ck_consumer, ck_create_topic, ck_watermarks, http_get,
                            kp_consumer, kp_producer, unique_topic)
from kafka_groups_testlib import PLUGIN_LIBS, group_config
from tls_testlib import OPENSSL, Certs, ConfigListenersBroker

pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl CLI is needed")

PASSWORDS = {"alice": "alice-pw-Tr0ub4dor", "bob": "bob-pw-c0rrect-h0rse",
             "admin": "admin-pw-s3cret-h0rse"}
NODE_MODULES = Path(__file__).resolve().parents[2] / "target" / "test-node" / "node_modules"
TIMEOUT = 30
ACL_LIB = "libdrover_authorizer_acl.so"
PANICKING_LIB = "libdrover_fixture_panicking_authorizer.so"


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    c = Certs(tmp_path_factory.mktemp("authz-certs"))
    c.broker = c.issue("broker", "/O=Drover Test/CN=localhost", kind="server")
    return c


class AuthzBroker(ConfigListenersBroker):
    """PLAINTEXT at `port` (administration: User:ANONYMOUS is a super user), SASL_SSL at
    `ssl_port`; the coordinator, the assignors and `authorizer` (a plugin name, or None)."""

    def __init__(self, workdir: Path, certs: Certs, authorizer: str | None = "acl",
                 extra: str = "", *, base: str | None = None, server: str = "",
                 acl_config: bool = True):
        super().__init__(workdir)
        self.certs = certs
        self.ssl_port = free_port()
        self.config_path = workdir / "drover.toml"
        authz = ""
        if authorizer == "acl":
            authz = ('[authorizer]\nplugin = "acl"\n\n[plugins.config.acl]\n'
                     'super_users = ["User:ANONYMOUS", "User:admin"]\n')
            if not acl_config:
                # The caller's `extra` has the table (more keys in it).
                authz = '[authorizer]\nplugin = "acl"\n'
                extra = extra.replace("[plugins.config.acl]\n", "[plugins.config.acl]\n"
                                      'super_users = ["User:ANONYMOUS", "User:admin"]\n')
        elif authorizer:
            authz = f'[authorizer]\nplugin = "{authorizer}"\n'
        self.config_path.write_text((group_config() if base is None else base) + f"""
[server]
listeners = ["PLAINTEXT://127.0.0.1:{self.port}", "SASL_SSL://127.0.0.1:{self.ssl_port}"]
{server}

[server.ssl]
certificate_chain = "{certs.broker[0]}"
private_key = "{certs.broker[1]}"

{authz}
{extra}
""")

    @property
    def ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"

    def conf(self, user: str, **extra) -> dict:
        """confluent-kafka settings for `user` over SASL_SSL."""
        return {"bootstrap.servers": self.ssl_bootstrap, "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
                "sasl.password": PASSWORDS[user], "ssl.ca.location": str(self.certs.ca),
                **extra}


def add_users(b) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    upserts = [UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), pw.encode())
        for user, pw in PASSWORDS.items()]
    for f in admin.alter_user_scram_credentials(upserts, request_timeout=TIMEOUT).values():
        f.result(timeout=TIMEOUT)


@pytest.fixture
def make_broker(tmp_path, request, certs):
    made = []

    def make(authorizer: str | None = "acl", libs=(ACL_LIB,), extra: str = ""):
        b = AuthzBroker(tmp_path / f"broker{len(made)}", certs, authorizer, extra)
        made.append(b)
        install_plugins(b, PLUGIN_LIBS + list(libs))
        start_or_fail(b)
        add_users(b)
        return b

    yield make
    rep = getattr(request.node, "rep_call", None)
    for b in made:
        b.kill9()
        if rep is not None and rep.failed and b.starts:
            print(f"--- broker log {b.workdir} ---\n{b.all_logs()[-20000:]}")


def acl(resource: ResourceType, name: str, principal: str, op: AclOperation, *,
        pattern=ResourcePatternType.LITERAL,
        permission=AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", op, permission)


def create_acls(bootstrap: str, bindings: list[AclBinding]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_acls(bindings, request_timeout=TIMEOUT).values():
        f.result(timeout=TIMEOUT)


def produce_error(conf: dict, topic: str, n: int = 3, **produce) -> KafkaError | None:
    """Produces n records with confluent-kafka; the first delivery error, if any."""
    p = Producer({**conf, "message.timeout.ms": 15000})
    errors = []
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(),
                  on_delivery=lambda err, _m: errors.append(err) if err else None, **produce)
    assert p.flush(30) == 0
    return errors[0] if errors else None


def end_offsets(b, topic: str, partitions: int = 1) -> list[int]:
    return [hw for _, (_, hw) in sorted(ck_watermarks(b, topic, range(partitions)).items())]


def test_producers_without_write_are_refused_and_write_nothing(make_broker):
    b = make_broker()
    topic = unique_topic("authz-nowrite")
    ck_create_topic(b, topic, 1)
    # alice may describe it (she sees it) but not write.
    create_acls(b.bootstrap, [acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.DESCRIBE)])
    # confluent-kafka
    err = produce_error(b.conf("alice"), topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    # kafka-python
    kp = kp_producer(b, bootstrap_servers=b.ssl_bootstrap, security_protocol="SASL_SSL",
                     sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice",
                     sasl_plain_password=PASSWORDS["alice"], ssl_cafile=str(b.certs.ca),
                     retries=0)
    with pytest.raises(Exception) as e:
        kp.send(topic, b"kp").get(timeout=TIMEOUT)
    assert "TopicAuthorizationFailed" in repr(e.value), repr(e.value)
    kp.close()
    # kafkajs
    node = shutil.which("node")
    if node and NODE_MODULES.exists():
        env = dict(os.environ, NODE_PATH=str(NODE_MODULES), KAFKAJS_PASSWORD=PASSWORDS["alice"])
        run = subprocess.run([node, str(Path(__file__).with_name("kafkajs_sasl.js")),
                              b.ssl_bootstrap, str(b.certs.ca), "alice", topic, "authz-kjs",
                              "3"], env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 1, run.stdout
        assert "TOPIC_AUTHORIZATION_FAILED" in run.stderr, run.stderr[-3000:]
    assert end_offsets(b, topic) == [0], "nothing was written"
    # With Write it works, and the decisions were counted.
    create_acls(b.bootstrap, [acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE)])
    assert produce_error(b.conf("alice"), topic) is None
    assert end_offsets(b, topic) == [3]
    _, _, metrics = http_get(f"{b.admin_url}/metrics")
    assert 'drover_authorizer_decisions_total{api="Produce",decision="denied"}' in metrics
    assert 'drover_authorizer_decisions_total{api="Produce",decision="allowed"}' in metrics


def test_consumers_without_read_on_their_group_are_refused(make_broker):
    b = make_broker()
    topic = unique_topic("authz-group")
    ck_create_topic(b, topic, 1)
    assert produce_error({"bootstrap.servers": b.bootstrap}, topic) is None
    create_acls(b.bootstrap, [acl(ResourceType.TOPIC, topic, "User:bob", AclOperation.READ)])
    for protocol in ("classic", "consumer"):
        c = ck_consumer(b, **{**b.conf("bob"), "group.id": f"denied-{protocol}",
                              "group.protocol": protocol, "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        error = None
        deadline = time.time() + TIMEOUT
        while error is None and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is not None:
                error = m.error()
            elif m is not None:
                pytest.fail(f"{protocol}: consumed without Read on the group")
        c.close()
        assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, \
            (protocol, error)
    # Read on the group: the classic and the KIP-848 consumer both read the records.
    for protocol in ("classic", "consumer"):
        group = f"allowed-{protocol}"
        create_acls(b.bootstrap, [acl(ResourceType.GROUP, group, "User:bob", AclOperation.READ)])
        c = ck_consumer(b, **{**b.conf("bob"), "group.id": group, "group.protocol": protocol,
                              "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        got = []
        deadline = time.time() + TIMEOUT
        while len(got) < 3 and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        c.close()
        assert len(got) == 3, (protocol, got)


def test_metadata_hides_undescribable_topics_with_prefixed_allow_and_literal_deny(make_broker):
    b = make_broker()
    prefix = unique_topic("app")
    visible, hidden, denied = f"{prefix}-orders", unique_topic("other"), f"{prefix}-secret"
    for t in (visible, hidden, denied):
        ck_create_topic(b, t, 1)
    create_acls(b.bootstrap, [
        acl(ResourceType.TOPIC, prefix, "User:alice", AclOperation.ALL,
            pattern=ResourcePatternType.PREFIXED),
        acl(ResourceType.TOPIC, denied, "User:alice", AclOperation.ALL,
            permission=AclPermissionType.DENY),
    ])
    listed = set(AdminClient(b.conf("alice")).list_topics(timeout=TIMEOUT).topics)
    assert visible in listed and hidden not in listed and denied not in listed, listed
    # The super user sees everything.
    everything = set(AdminClient(b.conf("admin")).list_topics(timeout=TIMEOUT).topics)
    assert {visible, hidden, denied} <= everything
    # PREFIXED allows writing; DENY beats it.
    assert produce_error(b.conf("alice"), visible) is None
    err = produce_error(b.conf("alice"), denied)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    assert end_offsets(b, denied) == [0]


def test_transactional_producer_without_write_on_its_id(make_broker):
    b = make_broker()
    topic = unique_topic("authz-txn")
    ck_create_topic(b, topic, 1)
    create_acls(b.bootstrap, [acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE)])
    p = Producer(b.conf("alice", **{"transactional.id": "authz-txn-denied"}))
    with pytest.raises(KafkaException) as e:
        p.init_transactions(TIMEOUT)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, e.value
    # With Write on the id the transaction commits.
    create_acls(b.bootstrap, [acl(ResourceType.TRANSACTIONAL_ID, "authz-txn-ok", "User:alice",
                                  AclOperation.WRITE)])
    p = Producer(b.conf("alice", **{"transactional.id": "authz-txn-ok"}))
    p.init_transactions(TIMEOUT)
    p.begin_transaction()
    p.produce(topic, b"in-txn")
    p.commit_transaction(TIMEOUT)
    assert end_offsets(b, topic) == [2]  # the record and the commit marker


def test_super_user_does_everything_and_acls_are_listed_and_deleted(make_broker):
    b = make_broker()
    topic = unique_topic("authz-super")
    admin = AdminClient(b.conf("admin"))
    from confluent_kafka.admin import NewTopic
    for f in admin.create_topics([NewTopic(topic, 1)]).values():
        f.result(TIMEOUT)
    assert produce_error(b.conf("admin"), topic) is None
    # alice may not create topics, describe or change ACLs.
    alice = AdminClient(b.conf("alice"))
    with pytest.raises(KafkaException) as e:
        for f in alice.create_topics([NewTopic(unique_topic("nope"), 1)]).values():
            f.result(TIMEOUT)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    any_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    with pytest.raises(Exception) as e:
        kp_describe_acls(b.ssl_bootstrap, security_protocol="SASL_SSL",
                         sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice",
                         sasl_plain_password=PASSWORDS["alice"], ssl_cafile=str(b.certs.ca))
    assert type(e.value).__name__ == "ClusterAuthorizationFailedError", repr(e.value)
    binding = acl(ResourceType.TOPIC, topic, "User:bob", AclOperation.READ)
    create_acls(b.bootstrap, [binding])
    listed = admin.describe_acls(any_filter, request_timeout=TIMEOUT).result(TIMEOUT)
    assert binding in listed, listed
    deleted = admin.delete_acls([any_filter], request_timeout=TIMEOUT)
    assert binding in list(deleted.values())[0].result(TIMEOUT)
    assert admin.describe_acls(any_filter, request_timeout=TIMEOUT).result(TIMEOUT) == []


def test_without_an_authorizer_describe_acls_is_security_disabled(make_broker):
    b = make_broker(authorizer=None, libs=())
    any_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    with pytest.raises(Exception) as e:
        kp_describe_acls(b.bootstrap)
    assert type(e.value).__name__ == "SecurityDisabledError", repr(e.value)
    del any_filter
    # And everything else works as before, for everyone.
    topic = unique_topic("authz-none")
    assert produce_error(b.conf("alice"), topic) is None


def kp_describe_acls(bootstrap: str, **security):
    """DescribeAcls with kafka-python's admin client, which raises on the response's
    error (confluent-kafka's describe_acls answers [] instead)."""
    from kafka.admin import (ACLFilter, ACLOperation as KOp, ACLPermissionType as KPerm,
                             ACLResourcePatternType as KPattern, KafkaAdminClient,
                             ResourcePatternFilter, ResourceType as KType)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **security)
    try:
        return admin.describe_acls(ACLFilter(
            principal=None, host=None, operation=KOp.ANY, permission_type=KPerm.ANY,
            resource_pattern=ResourcePatternFilter(KType.ANY, None, KPattern.ANY)))
    finally:
        admin.close()


def rescan(b) -> dict:
    out = subprocess.run([str(conftest.drover_bin()), "plugins", "rescan", "--admin",
                          f"{b.host}:{b.admin_port}", "--format", "json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_panicking_authorizer_denies_and_a_rescan_replaces_it(make_broker):
    """The fixture allows everything but panics on a resource named `panic`: the
    instance is then out of service and every later request is denied, until a rescan
    that replaces its file starts a new instance."""
    b = make_broker(authorizer="panicking", libs=(PANICKING_LIB,))
    topic = unique_topic("authz-panic")
    ck_create_topic(b, topic, 1)
    assert produce_error(b.conf("alice"), topic) is None
    err = produce_error(b.conf("alice"), "panic", n=1)
    assert err is not None, "a panic must deny"
    err = produce_error(b.conf("alice"), topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    _, _, metrics = http_get(f"{b.admin_url}/metrics")
    assert 'drover_authorizer_errors_total{reason="panicked"}' in metrics, metrics
    assert 'drover_authorizer_errors_total{reason="out_of_service"}' in metrics
    # A new version of the file (other bytes): the rescan starts it, and it decides
    # from the next request.
    src = conftest.drover_bin().parent / PANICKING_LIB
    tmp = b.plugin_dir / ".panicking.tmp"
    shutil.copyfile(src, tmp)
    with open(tmp, "ab") as f:
        f.write(b"\0drover-test-new-version")
    os.chmod(tmp, 0o644)
    os.replace(tmp, b.plugin_dir / PANICKING_LIB)
    report = rescan(b)
    assert any(c["name"] == "panicking" for c in report["replaced"]), report
    assert produce_error(b.conf("alice"), topic) is None
    assert end_offsets(b, topic) == [6]


def test_cluster_acls_reach_the_other_broker_and_survive_a_restart(tmp_path, certs, request):
    """Two brokers on one ZooKeeper: credentials and ACLs made through broker 1's
    administration listener decide alice's requests on broker 2, and after both
    restart."""
    import uuid

    from cluster_testlib import ZooKeeper, wait_until
    zk = ZooKeeper(tmp_path / "zookeeper").start()
    chroot = f"/drover-{uuid.uuid4().hex[:8]}"
    brokers = []
    try:
        for i in (1, 2):
            b = AuthzBroker(
                tmp_path / f"broker{i}", certs, "acl", base="",
                server=f"broker_id = {i}",
                extra=(f'[zookeeper]\nenabled = true\nconnect = "{zk.connect}"\n'
                       f'chroot = "{chroot}"\nsession_timeout_ms = 3000\nslots = 4\n'
                       "slot_claim_delay_ms = 500\n"
                       "[plugins.config.acl]\npoll_interval_ms = 200\n"),
                acl_config=False)
            brokers.append(b)
            install_plugins(b, [ACL_LIB])
            start_or_fail(b)
        b1, b2 = brokers
        # In cluster mode the authorizer starts once the broker's ZooKeeper session is
        # up, and every request is denied until then: retry until it decides.
        deadline = time.monotonic() + 60
        while True:
            try:
                add_users(b1)
                break
            except KafkaException as e:
                if (e.args[0].code() != KafkaError.CLUSTER_AUTHORIZATION_FAILED
                        or time.monotonic() > deadline):
                    raise
                time.sleep(0.5)
        topic = unique_topic("authz-cluster")
        ck_create_topic(b1, topic, 1)

        def alice_sees(b) -> bool:
            try:
                return topic in AdminClient(b.conf("alice")).list_topics(timeout=5).topics
            except KafkaException:
                return False

        # alice authenticates on broker 2 (her credential came through ZooKeeper) but
        # may not describe the topic yet.
        wait_until(lambda: AdminClient(b2.conf("alice")).list_topics(timeout=5) is not None,
                   TIMEOUT, "alice authenticated on broker 2")
        assert not alice_sees(b2)
        create_acls(b1.bootstrap, [
            acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE)])
        wait_until(lambda: alice_sees(b2), TIMEOUT, "the ACL made on broker 1 applies on broker 2")
        for b in brokers:
            b.restart()
        wait_until(lambda: alice_sees(b2), TIMEOUT, "the ACL after a restart")
        admin2 = AdminClient({"bootstrap.servers": b2.bootstrap})
        listed = admin2.describe_acls(
            AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.ANY, None, None,
                             AclOperation.ANY, AclPermissionType.ANY),
            request_timeout=TIMEOUT).result(TIMEOUT)
        assert listed == [acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE)]
    finally:
        rep = getattr(request.node, "rep_call", None)
        for b in brokers:
            b.kill9()
            if rep is not None and rep.failed and b.starts:
                print(f"--- broker log {b.workdir} ---\n{b.all_logs()[-20000:]}")
        zk.stop()


def test_drover_admin_acls_adds_lists_and_removes(make_broker):
    b = make_broker()
    topic = unique_topic("authz-cli")
    ck_create_topic(b, topic, 1)

    def cli(*args: str) -> str:
        r = subprocess.run([str(conftest.drover_bin()), "admin", "acls", "--bootstrap",
                            b.bootstrap, *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout

    cli("add", "--principal", "User:alice", "--operation", "write", "--topic", topic)
    cli("add", "--principal", "User:alice", "--operation", "describe", "--topic", topic[:8],
        "--pattern", "prefixed")
    listed = cli("list", "--principal", "User:alice")
    assert f"ALLOW User:alice WRITE from * on TOPIC {topic} (LITERAL)" in listed, listed
    assert f"on TOPIC {topic[:8]} (PREFIXED)" in listed, listed
    assert produce_error(b.conf("alice"), topic) is None
    assert "removed 1" in cli("remove", "--principal", "User:alice", "--operation", "write",
                              "--topic", topic)
    err = produce_error(b.conf("alice"), topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    # alice over SASL cannot use the CLI's PLAINTEXT path, and a broker without an
    # authorizer says so.
    plain = make_broker(authorizer=None, libs=())
    r = subprocess.run([str(conftest.drover_bin()), "admin", "acls", "--bootstrap",
                        plain.bootstrap, "list"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "SecurityDisabled" in r.stderr, r.stderr


def test_native_consumers_need_read_on_their_group_and_topics(make_broker, tmp_path):
    b = make_broker()
    topic = unique_topic("authz-native")
    ck_create_topic(b, topic, 1)
    assert produce_error({"bootstrap.servers": b.bootstrap}, topic) is None
    pw = tmp_path / "bob.pw"
    pw.write_text(PASSWORDS["bob"] + "\n")
    os.chmod(pw, 0o600)
    args = [str(conftest.drover_bin()), "consume", "--brokers", b.ssl_bootstrap,
            "--group", "native-authz", "--topic", topic, "--format", "values",
            "--max-messages", "3", "--security-protocol", "SASL_SSL",
            "--ssl-ca-location", str(b.certs.ca), "--sasl-mechanism", "SCRAM-SHA-512",
            "--sasl-username", "bob", "--sasl-password-file", str(pw)]
    # Describe on the group (FindCoordinator finds it), not Read (RegisterConsumer).
    create_acls(b.bootstrap, [
        acl(ResourceType.GROUP, "native-authz", "User:bob", AclOperation.DESCRIBE),
        acl(ResourceType.TOPIC, topic, "User:bob", AclOperation.DESCRIBE)])
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=10)
        out = r.stdout
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
    assert out.split() == [], "consumed without Read on the group"
    _, _, metrics = http_get(f"{b.admin_url}/metrics")
    assert 'drover_native_requests_total{api="RegisterConsumer",error="GroupAuthorizationFailed"}' \
        in metrics, [l for l in metrics.splitlines() if "native_requests" in l]
    create_acls(b.bootstrap, [
        acl(ResourceType.GROUP, "native-authz", "User:bob", AclOperation.READ),
        acl(ResourceType.TOPIC, topic, "User:bob", AclOperation.READ)])
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-3000:]
    assert sorted(r.stdout.split()) == ["v0", "v1", "v2"], r.stdout


def test_list_groups_shows_only_describable_groups(make_broker):
    b = make_broker()
    topic = unique_topic("authz-list")
    ck_create_topic(b, topic, 1)
    assert produce_error({"bootstrap.servers": b.bootstrap}, topic) is None
    # Two groups made by the (super user) administration listener.
    for group in ("listed-mine", "listed-other"):
        c = ck_consumer(b, **{"group.id": group})
        c.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        c.close()
    create_acls(b.bootstrap, [acl(ResourceType.GROUP, "listed-mine", "User:alice",
                                  AclOperation.DESCRIBE)])
    mine = AdminClient(b.conf("alice"))
    groups = {g.group_id for g in mine.list_consumer_groups(request_timeout=TIMEOUT)
              .result(TIMEOUT).valid}
    assert groups == {"listed-mine"}, groups
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    everything = {g.group_id for g in admin.list_consumer_groups(request_timeout=TIMEOUT)
                  .result(TIMEOUT).valid}
    assert {"listed-mine", "listed-other"} <= everything, everything


def admin_committed(b, group: str, topics: list[str]) -> dict[str, int]:
    """topic -> committed offset of partition 0 (-1001: none), as the super user sees."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(t, 0) for t in topics])
    admin = AdminClient({"bootstrap.servers": b.bootstrap})  # alive until the answer
    res = admin.list_consumer_group_offsets([req], request_timeout=TIMEOUT)[group] \
        .result(timeout=TIMEOUT)
    return {tp.topic: tp.offset for tp in res.topic_partitions}


def test_a_partly_allowed_commit_commits_the_allowed_topic(make_broker):
    """Kafka's `handleOffsetCommitRequest`: a commit to a topic alice may read and one
    she may not commits the first (fetchable after) and answers the second
    TOPIC_AUTHORIZATION_FAILED, which stays uncommitted."""
    b = make_broker()
    allowed, denied = unique_topic("authz-part-ok"), unique_topic("authz-part-no")
    for t in (allowed, denied):
        ck_create_topic(b, t, 1)
        assert produce_error({"bootstrap.servers": b.bootstrap}, t, n=10) is None
    group = "authz-part-commit"
    create_acls(b.bootstrap, [
        acl(ResourceType.GROUP, group, "User:alice", AclOperation.READ),
        acl(ResourceType.TOPIC, allowed, "User:alice", AclOperation.READ),
    ])
    c = ck_consumer(b, **{**b.conf("alice"), "group.id": group, "enable.auto.commit": False})
    # librdkafka raises a partition's error from a synchronous commit (and marks every
    # partition of an asynchronous one with it): the allowed partition's fate is read
    # back below.
    with pytest.raises(KafkaException) as e:
        c.commit(offsets=[TopicPartition(allowed, 0, 5), TopicPartition(denied, 0, 7)],
                 asynchronous=False)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, e.value
    # alice fetches her allowed offset; the denied topic's fetch is refused.
    got = c.committed([TopicPartition(allowed, 0), TopicPartition(denied, 0)],
                      timeout=TIMEOUT)
    by_topic = {tp.topic: tp for tp in got}
    assert by_topic[allowed].error is None and by_topic[allowed].offset == 5, by_topic
    assert by_topic[denied].error is not None \
        and by_topic[denied].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, by_topic
    c.close()
    # The super user sees the allowed offset committed and the denied one not.
    assert admin_committed(b, group, [allowed, denied]) == {allowed: 5, denied: -1001}
    # kafka-python reads each partition's code: it raises naming only the denied topic
    # (any other error on the allowed one would raise first, differently).
    from kafka.errors import TopicAuthorizationFailedError
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KTp
    kc = kp_consumer(b, bootstrap_servers=b.ssl_bootstrap, group_id=group,
                     security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                     sasl_plain_username="alice", sasl_plain_password=PASSWORDS["alice"],
                     ssl_cafile=str(b.certs.ca))
    try:
        with pytest.raises(TopicAuthorizationFailedError) as e:
            kc.commit({KTp(allowed, 0): OffsetAndMetadata(6, "", -1),
                       KTp(denied, 0): OffsetAndMetadata(8, "", -1)})
        assert e.value.args == ({denied},), e.value.args
    finally:
        kc.close()
    assert admin_committed(b, group, [allowed, denied]) == {allowed: 6, denied: -1001}


def test_describe_groups_of_an_allowed_and_a_denied_group(make_broker):
    """Kafka's `handleDescribeGroupsRequest`: the allowed group is described, the denied
    one answers GROUP_AUTHORIZATION_FAILED; KIP-430 operations come from the ACLs."""
    b = make_broker()
    topic = unique_topic("authz-describe")
    ck_create_topic(b, topic, 1)
    mine, other = "authz-desc-mine", "authz-desc-other"
    for group in (mine, other):
        c = ck_consumer(b, **{"group.id": group})
        c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
        c.close()
    create_acls(b.bootstrap, [acl(ResourceType.GROUP, mine, "User:alice",
                                  AclOperation.READ)])
    alice = AdminClient(b.conf("alice"))
    for include in (False, True):
        futures = alice.describe_consumer_groups(
            [mine, other], request_timeout=TIMEOUT, include_authorized_operations=include)
        described = futures[mine].result(timeout=TIMEOUT)
        assert described.group_id == mine
        with pytest.raises(KafkaException) as e:
            futures[other].result(timeout=TIMEOUT)
        assert e.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED, e.value
        if include:
            # READ implies DESCRIBE (Kafka's ACL rules); nothing else was granted.
            assert set(described.authorized_operations) == {
                AclOperation.READ, AclOperation.DESCRIBE}, described.authorized_operations
        else:
            assert described.authorized_operations is None
    # The super user is allowed every group operation Kafka reports.
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    everything = admin.describe_consumer_groups(
        [other], request_timeout=TIMEOUT,
        include_authorized_operations=True)[other].result(timeout=TIMEOUT)
    assert set(everything.authorized_operations) == {
        AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
        AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}, \
        everything.authorized_operations


def test_a_kip848_consumer_needs_describe_on_its_named_topics(make_broker):
    """KAFKA-18813: a KIP-848 heartbeat subscribing by name to a topic the principal
    may not describe is answered TOPIC_AUTHORIZATION_FAILED and the member never joins
    (no assignment reveals the topic's id or partitions)."""
    b = make_broker()
    topic = unique_topic("authz-848-hidden")
    ck_create_topic(b, topic, 2)
    group = "authz-848-names"
    create_acls(b.bootstrap, [acl(ResourceType.GROUP, group, "User:bob", AclOperation.READ)])
    c = ck_consumer(b, **{**b.conf("bob"), "group.id": group, "group.protocol": "consumer",
                          "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    errors = []
    deadline = time.time() + 10
    while time.time() < deadline and not errors:
        m = c.poll(0.5)
        if m is not None and m.error() is not None:
            errors.append(m.error())
    assert not c.assignment(), c.assignment()
    c.close()
    assert errors and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errors
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    described = admin.describe_consumer_groups([group], request_timeout=TIMEOUT)[group]
    try:
        members = described.result(timeout=TIMEOUT).members
    except KafkaException as e:  # never created: GROUP_ID_NOT_FOUND
        assert e.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND, e
        members = []
    assert members == [], members
