"""ZooKeeper digest authentication and ACLs (issue 29 item 7; docs/security.md,
"ZooKeeper"): brokers with `zookeeper.auth_digest_file` authenticate as its user and
create their nodes with an ACL that gives that identity every right and anyone else
read only. A second broker with the same file joins (it writes under nodes the first
created); a client without the credentials reads the chroot but cannot change, add or
delete a node (ZooKeeper's own CLI, ZooKeeperMain, against the real server)."""

from __future__ import annotations

import json
import secrets
import subprocess

import pytest

from cluster_testlib import ZK_JARS, ZooKeeper, cluster_config, wait_until
from drover_testlib import ck_create_topic, http_get
from test_offset_store_backends import store_broker, swap_ok  # noqa: F401


def zk_cli(zk: ZooKeeper, commands: list[str]) -> str:
    """Runs `commands` in one unauthenticated ZooKeeperMain session; its output."""
    r = subprocess.run(
        ["java", "-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
         "-cp", ":".join(ZK_JARS), "org.apache.zookeeper.ZooKeeperMain",
         "-server", zk.connect],
        input="\n".join(commands + ["quit"]) + "\n", capture_output=True, text=True,
        timeout=60)
    return r.stdout + r.stderr


def test_nodes_belong_to_the_brokers_identity(tmp_path, zookeeper, broker_factory):
    digest = tmp_path / "zk.digest"
    password = secrets.token_urlsafe(18)
    digest.write_text(f"drover:{password}\n")
    digest.chmod(0o600)
    chroot = f"/drover-acl-{secrets.token_hex(4)}"
    extra = f'auth_digest_file = "{digest}"\n'
    brokers = [broker_factory(cluster_config(zookeeper, chroot, i, coordinator=False,
                                             extra=extra)) for i in (1, 2)]

    def registered() -> bool:
        status, _, body = http_get(brokers[0].admin_url + "/v1/cluster")
        return status == 200 and len(json.loads(body)["view"]["brokers"]) == 2

    wait_until(registered, 20, "both brokers registered")
    ck_create_topic(brokers[0], "acl-topic", 2)
    out = zk_cli(zookeeper, [
        f"getAcl {chroot}/brokers/ids",
        f"getAcl {chroot}/brokers/topics/acl-topic",
        f"ls {chroot}/brokers/ids",
        f"set {chroot}/cluster/id stolen",
        f"create {chroot}/brokers/topics/evil x",
        f"delete {chroot}/brokers/topics/acl-topic",
        f"setAcl {chroot}/brokers/topics world:anyone:cdrwa",
        f"get {chroot}/cluster/id",
    ])
    assert out.count("'digest,'drover:") >= 2, out
    assert out.count("'world,'anyone\n: r") >= 2, out
    assert "[1, 2]" in out, out
    assert out.count("Insufficient permission") + out.count("NoAuth") >= 4, out
    assert "stolen" not in out.split(f"get {chroot}/cluster/id")[-1], out
    assert password not in "\n".join(b.all_logs() for b in brokers)


def test_nodes_made_before_the_digest_get_its_acl_at_restart(tmp_path, zookeeper, broker_factory):
    """A chroot made by a broker without `auth_digest_file` is open to anyone; restarted
    with it, the broker gives every open node below the chroot (and the chroot) the
    digest ACL, so an unauthenticated client can no longer change them."""
    chroot = f"/drover-acl-{secrets.token_hex(4)}"
    b = broker_factory(cluster_config(zookeeper, chroot, 1, coordinator=False))

    def registered() -> bool:
        status, _, body = http_get(b.admin_url + "/v1/cluster")
        return status == 200 and len(json.loads(body)["view"]["brokers"]) == 1

    wait_until(registered, 20, "the broker registered")
    ck_create_topic(b, "open-topic", 2)
    before = zk_cli(zookeeper, [f"getAcl {chroot}", f"getAcl {chroot}/brokers/topics/open-topic"])
    assert before.count("'world,'anyone\n: cdrwa") >= 2, before

    digest = tmp_path / "zk.digest"
    password = secrets.token_urlsafe(18)
    digest.write_text(f"drover:{password}\n")
    digest.chmod(0o600)
    b.config_path.write_text(cluster_config(zookeeper, chroot, 1, coordinator=False,
                                            extra=f'auth_digest_file = "{digest}"\n'))
    b.restart()
    wait_until(registered, 20, "the broker registered again")
    out = zk_cli(zookeeper, [
        f"getAcl {chroot}",
        f"getAcl {chroot}/brokers",
        f"getAcl {chroot}/brokers/topics/open-topic",
        f"getAcl {chroot}/cluster/id",
        f"set {chroot}/cluster/id stolen",
        f"create {chroot}/brokers/topics/evil x",
        f"delete {chroot}/brokers/topics/open-topic",
        f"setAcl {chroot}/brokers/topics world:anyone:cdrwa",
        f"get {chroot}/cluster/id",
    ])
    assert out.count("'digest,'drover:") >= 4, out
    assert "'world,'anyone\n: cdrwa" not in out, out
    assert out.count("Insufficient permission") + out.count("NoAuth") >= 4, out
    assert "stolen" not in out.split(f"get {chroot}/cluster/id")[-1], out
    assert "existing nodes checked against the digest ACL" in b.all_logs()
    assert password not in b.all_logs()


def test_the_standalone_zookeeper_offset_store_authenticates(tmp_path, zookeeper, store_broker):
    """The `zookeeper` offset store on its own session (a standalone broker) with
    `auth_digest_file`: its session authenticates and its nodes get the digest ACL, so
    an unauthenticated client cannot change them."""
    digest = tmp_path / "store.digest"
    password = secrets.token_urlsafe(18)
    digest.write_text(f"offsets:{password}\n")
    digest.chmod(0o600)
    chroot = f"/offsets-acl-{secrets.token_hex(4)}"
    swap_ok(store_broker, "zookeeper", f'connect = "{zookeeper.connect}"\nchroot = "{chroot}"\n'
            f'auth_digest_file = "{digest}"\n')
    out = zk_cli(zookeeper, [f"ls -R {chroot}", f"getAcl {chroot}",
                             f"create {chroot}/evil x", f"setAcl {chroot} world:anyone:cdrwa"])
    assert out.count("'digest,'offsets:") >= 1, out
    assert "'world,'anyone\n: cdrwa" not in out, out
    assert out.count("Insufficient permission") + out.count("NoAuth") >= 2, out
    assert password not in store_broker.all_logs()
