"""Offset retention (KIP-211 semantics): an empty group's committed offsets expire
`offsets.retention_ms` after it became empty; a group with members keeps them."""

from __future__ import annotations

import subprocess
import time

import pytest

import native_protocol as np
from conftest import BrokerError, drover_bin
from drover_testlib import Msg, ck_create_topic, ck_produce
from test_offset_swap import install_plugins

CONFIG = """\
[plugins]
required = ["drover-coordinator", "range", "embedded"]
[offsets]
retention_ms = 1500
retention_check_interval_ms = 200
[plugins.config.drover-coordinator]
min_session_timeout_ms = 1000
rebalance_delay_ms = 50
commit_interval_ms = 100
"""


def committed(b, group) -> dict:
    resp = np.fetch_offsets(b.host, b.port, group)
    return {(t, p): off for t, parts in resp.topics for p, off, _m, _e in parts}


def test_empty_groups_expire_and_groups_with_members_keep_their_offsets(broker_factory):
    b = broker_factory(CONFIG, start=False)
    install_plugins(b)
    try:
        b.start()
    except BrokerError as e:
        pytest.fail(str(e), pytrace=False)
    ck_create_topic(b, "ret", 1)
    ck_produce(b, "ret", [Msg(b"k", b"v", [], partition=0)])
    # `busy` has a member: a connector that reads the record and keeps running.
    member = subprocess.Popen(
        [str(drover_bin()), "consume", "--brokers", b.bootstrap, "--group", "busy",
         "--topic", "ret", "--session-timeout-ms", "3000", "--format", "offsets",
         "--auto-commit-interval-ms", "200"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # `idle` has committed offsets and no members.
        with np.Conn(b.host, b.port) as c:
            resp = c.request(np.CommitOffsetRequest("idle", "", -1, [("ret", [(0, 1, None)])]))
            assert {code for _, parts in resp.topics for _, code in parts} == {0}
        deadline = time.time() + 20
        while time.time() < deadline and committed(b, "busy") != {("ret", 0): 1}:
            time.sleep(0.1)
        assert committed(b, "busy") == {("ret", 0): 1}, "the member's offset was not committed"
        deadline = time.time() + 20
        while time.time() < deadline and committed(b, "idle"):
            time.sleep(0.1)
        assert committed(b, "idle") == {}, "the empty group's offsets did not expire"
        # The group with a member kept its offset past the retention time.
        time.sleep(2)
        assert committed(b, "busy") == {("ret", 0): 1}
        assert member.poll() is None, member.stderr.read()
    finally:
        member.terminate()
        member.wait(timeout=30)


def test_swapping_back_to_an_older_store_does_not_revive_expired_groups(broker_factory, tmp_path):
    """A group deleted by retention while another store was active must not come back
    when the broker swaps back to a store that still holds it."""
    import json
    import urllib.request

    from test_offset_swap import wait_swap

    b = broker_factory(CONFIG, start=False)
    install_plugins(b)
    try:
        b.start()
    except BrokerError as e:
        pytest.fail(str(e), pytrace=False)
    ck_create_topic(b, "ret2", 1)

    def swap(config: str):
        body = json.dumps({"plugin": "embedded", "config": config}).encode()
        req = urllib.request.Request(f"{b.admin_url}/v1/offset-store", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 202
        s = wait_swap(b)
        assert s["swap"]["state"] == "completed", s

    with np.Conn(b.host, b.port) as c:
        c.request(np.CommitOffsetRequest("gone", "", -1, [("ret2", [(0, 3, None)])]))
    original = b.data_dir / "offsets.redb"
    swap(f'path = "{tmp_path / "other.redb"}"\n')
    deadline = time.time() + 20
    while time.time() < deadline and committed(b, "gone"):
        time.sleep(0.1)
    assert committed(b, "gone") == {}, "retention did not expire the group"
    # The original file still has `gone`; swapping back must not revive it.
    swap(f'path = "{original}"\n')
    assert committed(b, "gone") == {}
