"""SCRAM credentials as Kafka manages them (issue 29 item 4; KIP-554): confluent-kafka's
and kafka-python's admin clients alter and describe them against a running broker, with
Kafka's error codes for bad iterations, unknown users and duplicates; the broker keeps
only salts and derived keys (never a password) in an owner-only file that a restart
reads back; `drover admin users` makes the first credential offline and refuses to
edit a running broker's file; in cluster mode a credential altered through one broker
is described by, and reaches the authentication store of, the other."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion,
                                   UserScramCredentialUpsertion)

from cluster_testlib import start_cluster, wait_until
from conftest import drover_bin

TIMEOUT = 20
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
PASSWORD = b"correct horse battery staple"


def admin(b) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap})


def upsert(user: str, mechanism=SHA512, iterations: int = 8192, password: bytes = PASSWORD):
    return UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, iterations), password)


def alter(a: AdminClient, alterations) -> dict[str, KafkaError | None]:
    """Each user's outcome: None (done) or the error."""
    out = {}
    for user, f in a.alter_user_scram_credentials(alterations, request_timeout=TIMEOUT).items():
        try:
            f.result(timeout=TIMEOUT)
            out[user] = None
        except KafkaException as e:
            out[user] = e.args[0]
    return out


def described(a: AdminClient, users=None) -> dict[str, dict[int, int] | KafkaError]:
    """user -> {mechanism: iterations}, or the user's error."""
    if users is None:
        found = a.describe_user_scram_credentials(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
        return {u: {i.mechanism: i.iterations for i in d.scram_credential_infos}
                for u, d in found.items()}
    out = {}
    for user, f in a.describe_user_scram_credentials(users, request_timeout=TIMEOUT).items():
        try:
            d = f.result(timeout=TIMEOUT)
            out[user] = {i.mechanism: i.iterations for i in d.scram_credential_infos}
        except KafkaException as e:
            out[user] = e.args[0]
    return out


def code(outcome) -> int | None:
    return None if outcome is None or isinstance(outcome, dict) else outcome.code()


def test_confluent_admin_alters_and_describes_and_a_restart_keeps_them(broker):
    a = admin(broker)
    assert alter(a, [upsert("alice", SHA256, 4096), upsert("bob", SHA512, 16384)]) == {
        "alice": None, "bob": None}
    assert described(a) == {"alice": {SHA256: 4096}, "bob": {SHA512: 16384}}

    # Kafka's refusals (KIP-554; Kafka 4's ScramControlManager).
    outcome = alter(a, [upsert("few", iterations=4095), upsert("many", iterations=16385),
                        upsert("carol", SHA256), upsert("carol", SHA512),
                        UserScramCredentialDeletion("ghost", SHA256)])
    assert code(outcome["few"]) == KafkaError.UNACCEPTABLE_CREDENTIAL
    assert code(outcome["many"]) == KafkaError.UNACCEPTABLE_CREDENTIAL
    assert code(outcome["carol"]) == KafkaError.DUPLICATE_RESOURCE
    assert code(outcome["ghost"]) == KafkaError.RESOURCE_NOT_FOUND
    found = described(a, ["alice", "ghost"])
    assert found["alice"] == {SHA256: 4096}
    assert code(found["ghost"]) == KafkaError.RESOURCE_NOT_FOUND
    assert "carol" not in described(a)

    # A second mechanism for alice, then bob's only credential deleted.
    assert alter(a, [upsert("alice", SHA512, 8192)]) == {"alice": None}
    assert alter(a, [UserScramCredentialDeletion("bob", SHA512)]) == {"bob": None}
    assert described(a) == {"alice": {SHA256: 4096, SHA512: 8192}}

    # On disk: owner-only, salts and keys but no password.
    path = broker.data_dir / "scram_credentials.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    stored = path.read_bytes()
    assert b"alice" in stored and PASSWORD not in stored

    broker.restart()
    assert described(admin(broker)) == {"alice": {SHA256: 4096, SHA512: 8192}}
    assert PASSWORD.decode() not in broker.all_logs()


def test_kafka_python_admin_alters_and_describes(broker):
    """kafka-python's `alter_user_scram_credentials` (user -> None or the error message)
    and `describe_user_scram_credentials` (user -> {'error', 'credential_infos'})."""
    from kafka.admin import KafkaAdminClient  # noqa: PLC0415
    from kafka.admin._users import (ScramMechanism as KpMechanism,  # noqa: PLC0415
                                    UserScramCredentialDeletion as KpDeletion,
                                    UserScramCredentialUpsertion as KpUpsertion)

    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    try:
        assert a.alter_user_scram_credentials([
            KpUpsertion("dave", KpMechanism.SCRAM_SHA_512, PASSWORD, iterations=8192),
        ]) == {"dave": None}
        refused = a.alter_user_scram_credentials([
            KpUpsertion("erin", KpMechanism.SCRAM_SHA_256, PASSWORD, iterations=1000),
            KpDeletion("nobody", KpMechanism.SCRAM_SHA_256),
        ])
        assert refused == {"erin": "Too few iterations",
                           "nobody": "Attempt to delete a user credential that does not exist"}
        found = a.describe_user_scram_credentials(["dave", "nobody"])
        assert found["dave"] == {"error": None, "credential_infos": [
            {"mechanism": KpMechanism.SCRAM_SHA_512, "iterations": 8192}]}
        assert found["nobody"]["error"] == \
            "Attempt to describe a user credential that does not exist"
        assert a.alter_user_scram_credentials(
            [KpDeletion("dave", KpMechanism.SCRAM_SHA_512)]) == {"dave": None}
        assert a.describe_user_scram_credentials() == {}
    finally:
        a.close()


def users_cli(*args, password: bytes | None = None, check=True) -> subprocess.CompletedProcess:
    return subprocess.run([str(drover_bin()), "admin", "users", *args], input=password,
                          capture_output=True, timeout=60, check=check)


def test_the_cli_bootstraps_offline_and_refuses_a_running_brokers_file(broker_factory, tmp_path):
    b = broker_factory(start=False)
    pw = tmp_path / "pw"
    pw.write_bytes(PASSWORD + b"\n")
    os.chmod(pw, 0o600)
    users_cli("--data-dir", str(b.data_dir), "add", "admin", "--mechanism", "SCRAM-SHA-256",
              "--iterations", "4096", "--password-file", str(pw))
    # Standard input works too; the password is never an argument.
    users_cli("--data-dir", str(b.data_dir), "add", "ops", password=PASSWORD + b"\n")
    listed = users_cli("--data-dir", str(b.data_dir), "list").stdout.decode()
    assert "admin SCRAM-SHA-256 iterations=4096" in listed
    assert "ops SCRAM-SHA-512 iterations=8192" in listed
    bad = users_cli("--data-dir", str(b.data_dir), "add", "x", "--iterations", "100",
                    password=PASSWORD, check=False)
    assert bad.returncode == 1 and b"4096 to 16384" in bad.stderr

    b.start()
    a = admin(b)
    assert described(a) == {"admin": {SHA256: 4096}, "ops": {SHA512: 8192}}
    locked = users_cli("--data-dir", str(b.data_dir), "list", check=False)
    assert locked.returncode == 1 and b"locked" in locked.stderr
    # Through the broker instead.
    users_cli("--bootstrap", b.bootstrap, "add", "svc", "--password-file", str(pw))
    users_cli("--bootstrap", b.bootstrap, "delete", "ops", "--mechanism", "scram-sha-512")
    assert described(a) == {"admin": {SHA256: 4096}, "svc": {SHA512: 8192}}
    missing = users_cli("--bootstrap", b.bootstrap, "list", "nobody", check=False)
    assert missing.returncode == 1 and b"error 91" in missing.stderr
    assert PASSWORD.decode() not in b.all_logs()


def test_a_damaged_credential_file_stops_the_broker_with_its_name(broker_factory):
    b = broker_factory(start=False)
    (b.data_dir / "scram_credentials.json").write_text('{"version": 1, "users": ')
    proc = subprocess.run(b.command(), capture_output=True, timeout=60)
    assert proc.returncode != 0
    assert b"scram_credentials.json is damaged" in proc.stderr


def test_cluster_an_alteration_through_one_broker_reaches_the_other(broker_factory, zookeeper):
    b1, b2 = start_cluster(broker_factory, zookeeper, n=2)
    assert alter(admin(b1), [upsert("alice", SHA512, 8192)]) == {"alice": None}
    # Described through broker 2 (it reads the credentials' ZooKeeper node) ...
    wait_until(lambda: described(admin(b2)) == {"alice": {SHA512: 8192}}, TIMEOUT,
               "alice described through broker 2")
    # ... and broker 2's authentication store followed the node's watch.
    wait_until(lambda: "SCRAM credentials loaded from ZooKeeper" in b2.stderr_text()
               and "users=1" in b2.stderr_text(), TIMEOUT, "broker 2 loaded the alteration")
    assert alter(admin(b2), [UserScramCredentialDeletion("alice", SHA512)]) == {"alice": None}
    wait_until(lambda: described(admin(b1)) == {}, TIMEOUT, "deletion seen through broker 1")
    b1.restart()
    # The restarted broker serves Kafka before its ZooKeeper session may be back (and a
    # session can drop for a moment): an alteration then fails with "not connected",
    # which the client may retry; the upsert is idempotent.
    wait_until(lambda: alter(admin(b1), [upsert("bob", SHA256, 4096)]) == {"bob": None},
               TIMEOUT, "bob altered through the restarted broker 1")
    wait_until(lambda: described(admin(b2)) == {"bob": {SHA256: 4096}}, TIMEOUT,
               "bob described through broker 2")
