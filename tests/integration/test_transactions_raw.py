"""The transaction coordinator's state machine through raw frames (issue 18, item 1):
FindCoordinator for transaction keys, InitProducerId with a transactional id (epoch
bump, fencing abort of an open transaction with CONCURRENT_TRANSACTIONS while it
completes), AddPartitionsToTxn / AddOffsetsToTxn / EndTxn and their errors (stale epoch,
EndTxn without a transaction, unknown partitions, the partitions-per-transaction bound,
the transactional-id bound), the transaction timeout aborting an open transaction,
durability across kill -9, DescribeTransactions, ListTransactions, the admin API and
the metrics. Before this change every one of these requests closed the connection
(APIs not served) or was answered COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import json
import struct
import time

from drover_testlib import (
    API_FIND_COORDINATOR,
    RawConn,
    api_versions,
    ck_create_topic,
    http_get,
    kstr,
    unique_topic,
    uvarint,
)

API_INIT_PRODUCER_ID, API_ADD_PARTITIONS, API_ADD_OFFSETS, API_END_TXN = 22, 24, 25, 26
API_DESCRIBE_TXNS, API_LIST_TXNS = 65, 66

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
COORDINATOR_NOT_AVAILABLE = 15
INVALID_REQUEST = 42
POLICY_VIOLATION = 44
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
OPERATION_NOT_ATTEMPTED = 55
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105

# Small bounds and a fast timeout sweep, so the tests can reach them.
CONFIG = """
[transactions]
transaction_max_timeout_ms = 60000
transaction_abort_timed_out_transaction_cleanup_interval_ms = 100
max_transactional_ids = 4
max_partitions_per_transaction = 3
"""


def init_pid(c: RawConn, tid: str | None, timeout_ms: int = 60000) -> tuple[int, int, int]:
    """InitProducerId v1 -> (error, producer id, epoch)."""
    corr = c.request(API_INIT_PRODUCER_ID, 1, kstr(tid) + struct.pack(">i", timeout_ms))
    _t, error, pid, epoch = struct.unpack_from(">ihqh", c.recv_response(corr), 0)
    return error, pid, epoch


def add_partitions(c: RawConn, tid: str, pid: int, epoch: int,
                   topics: dict[str, list[int]], version: int = 2) -> dict[tuple[str, int], int]:
    """AddPartitionsToTxn v0-v2 -> {(topic, partition): error}."""
    body = kstr(tid) + struct.pack(">qhi", pid, epoch, len(topics))
    for name, parts in topics.items():
        body += kstr(name) + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    data = c.recv_response(c.request(API_ADD_PARTITIONS, version, body))
    at = 4
    (n,) = struct.unpack_from(">i", data, at)
    at += 4
    out = {}
    for _ in range(n):
        (ln,) = struct.unpack_from(">h", data, at)
        name = data[at + 2:at + 2 + ln].decode()
        at += 2 + ln
        (m,) = struct.unpack_from(">i", data, at)
        at += 4
        for _ in range(m):
            p, err = struct.unpack_from(">ih", data, at)
            at += 6
            out[(name, p)] = err
    return out


def add_offsets(c: RawConn, tid: str, pid: int, epoch: int, group: str, version: int = 2) -> int:
    body = kstr(tid) + struct.pack(">qh", pid, epoch) + kstr(group)
    return struct.unpack_from(">ih", c.recv_response(c.request(API_ADD_OFFSETS, version, body)), 0)[1]


def end_txn(c: RawConn, tid: str, pid: int, epoch: int, commit: bool, version: int = 2) -> int:
    body = kstr(tid) + struct.pack(">qhb", pid, epoch, 1 if commit else 0)
    return struct.unpack_from(">ih", c.recv_response(c.request(API_END_TXN, version, body)), 0)[1]


def cstr(s: str) -> bytes:
    b = s.encode()
    return uvarint(len(b) + 1) + b


def read_cstr(data: bytes, at: int) -> tuple[str, int]:
    n, at = read_uvarint(data, at)
    return data[at:at + n - 1].decode(), at + n - 1


def read_uvarint(data: bytes, at: int) -> tuple[int, int]:
    shift = n = 0
    while True:
        b = data[at]
        at += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, at


def list_txns(c: RawConn, states: list[str] = ()) -> tuple[int, list[str], dict[str, tuple[int, str]]]:
    """ListTransactions v0 -> (error, unknown state filters, {id: (producer id, state)})."""
    body = uvarint(len(states) + 1) + b"".join(cstr(s) for s in states) + uvarint(1) + b"\x00"
    data = c.recv_response(c.request(API_LIST_TXNS, 0, body, flexible_header=True), flexible_header=True)
    _t, error = struct.unpack_from(">ih", data, 0)
    at = 6
    n, at = read_uvarint(data, at)
    unknown = []
    for _ in range(n - 1):
        s, at = read_cstr(data, at)
        unknown.append(s)
    n, at = read_uvarint(data, at)
    out = {}
    for _ in range(n - 1):
        tid, at = read_cstr(data, at)
        (pid,) = struct.unpack_from(">q", data, at)
        state, at = read_cstr(data, at + 8)
        at += 1  # tagged fields
        out[tid] = (pid, state)
    return error, unknown, out


def describe_txn(c: RawConn, tid: str) -> tuple[int, str, int, int, dict[str, list[int]]]:
    """DescribeTransactions v0 for one id -> (error, state, producer id, epoch, topics)."""
    body = uvarint(2) + cstr(tid) + b"\x00"
    data = c.recv_response(c.request(API_DESCRIBE_TXNS, 0, body, flexible_header=True), flexible_header=True)
    at = 4
    n, at = read_uvarint(data, at)
    assert n == 2
    (error,) = struct.unpack_from(">h", data, at)
    _tid, at = read_cstr(data, at + 2)
    state, at = read_cstr(data, at)
    _timeout, _start, pid, epoch = struct.unpack_from(">iqqh", data, at)
    at += 22
    n, at = read_uvarint(data, at)
    topics = {}
    for _ in range(n - 1):
        name, at = read_cstr(data, at)
        m, at = read_uvarint(data, at)
        topics[name] = list(struct.unpack_from(f">{m - 1}i", data, at))
        at += 4 * (m - 1) + 1
    return error, state, pid, epoch, topics


def find_txn_coordinator(c: RawConn, tid: str) -> tuple[int, int, str, int]:
    """FindCoordinator v1, key type 1 -> (error, node, host, port)."""
    corr = c.request(API_FIND_COORDINATOR, 1, kstr(tid) + struct.pack(">b", 1))
    data = c.recv_response(corr)
    _t, error = struct.unpack_from(">ih", data, 0)
    at = 6
    (ln,) = struct.unpack_from(">h", data, at)
    at += 2 + max(ln, 0)
    node, = struct.unpack_from(">i", data, at)
    (ln,) = struct.unpack_from(">h", data, at + 4)
    host = data[at + 6:at + 6 + ln].decode() if ln > 0 else ""
    (port,) = struct.unpack_from(">i", data, at + 6 + max(ln, 0))
    return error, node, host, port


def wait_for(pred, what: str, timeout: float = 20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_versions_and_find_coordinator(broker):
    versions = api_versions(broker)
    # Kafka 4.1's ranges, EndTxn stopped below v5 (KIP-890 part 2).
    assert versions[API_ADD_PARTITIONS] == (0, 5)
    assert versions[API_ADD_OFFSETS] == (0, 4)
    assert versions[API_END_TXN] == (0, 4)
    assert versions[API_DESCRIBE_TXNS] == (0, 0)
    assert versions[API_LIST_TXNS] == (0, 2)
    with RawConn(broker) as c:
        err, node, host, port = find_txn_coordinator(c, "tx-a")
        assert (err, host, port) == (NONE, broker.host, broker.port) and node >= 0
        assert find_txn_coordinator(c, "")[0] == INVALID_REQUEST


def test_init_bumps_the_epoch_and_an_open_transaction_is_aborted_first(broker_factory):
    b = broker_factory(CONFIG)
    topic = unique_topic("txn-raw")
    ck_create_topic(b, topic, 2)
    with RawConn(b) as c:
        assert init_pid(c, "")[0] == INVALID_REQUEST
        assert init_pid(c, "a", timeout_ms=0)[0] == INVALID_TRANSACTION_TIMEOUT
        assert init_pid(c, "a", timeout_ms=60001)[0] == INVALID_TRANSACTION_TIMEOUT
        err, pid, epoch = init_pid(c, "a")
        assert (err, epoch) == (NONE, 0)
        assert init_pid(c, "a") == (NONE, pid, 1)
        # EndTxn without a transaction.
        assert end_txn(c, "a", pid, 1, True) == INVALID_TXN_STATE
        # A stale epoch is fenced: PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before.
        assert set(add_partitions(c, "a", pid, 0, {topic: [0]}).values()) == {PRODUCER_FENCED}
        assert set(add_partitions(c, "a", pid, 0, {topic: [0]}, version=1).values()) == {INVALID_PRODUCER_EPOCH}
        assert set(add_partitions(c, "a", pid + 1, 1, {topic: [0]}).values()) == {INVALID_PRODUCER_ID_MAPPING}
        assert set(add_partitions(c, "nobody", pid, 1, {topic: [0]}).values()) == {INVALID_PRODUCER_ID_MAPPING}
        # An unknown partition: it alone is UNKNOWN_TOPIC_OR_PARTITION, nothing is added.
        assert add_partitions(c, "a", pid, 1, {topic: [0, 7]}) == {
            (topic, 0): OPERATION_NOT_ATTEMPTED, (topic, 7): UNKNOWN_TOPIC_OR_PARTITION}
        assert add_partitions(c, "a", pid, 1, {topic: [0, 1]}) == {(topic, 0): NONE, (topic, 1): NONE}
        assert add_offsets(c, "a", pid, 1, "group-1") == NONE
        err, state, dpid, depoch, topics = describe_txn(c, "a")
        assert (err, state, dpid, depoch, topics) == (NONE, "Ongoing", pid, 1, {topic: [0, 1]})
        # A second producer with the id: the open transaction is aborted first
        # (CONCURRENT_TRANSACTIONS until it is complete), then it gets the next epoch.
        first = init_pid(c, "a")
        assert first[0] in (CONCURRENT_TRANSACTIONS, NONE)
        got = wait_for(lambda: (r := init_pid(c, "a"))[0] == NONE and r, "the fencing abort")
        assert got[1] == pid and got[2] >= 3
        # The fenced producer's commit fails.
        assert end_txn(c, "a", pid, 1, True) == PRODUCER_FENCED
        assert end_txn(c, "a", pid, 1, True, version=1) == INVALID_PRODUCER_EPOCH
        assert describe_txn(c, "a")[1] == "Empty"
        assert describe_txn(c, "nobody")[0] == TRANSACTIONAL_ID_NOT_FOUND


def test_commit_and_abort_complete_and_retries_are_answered(broker_factory):
    b = broker_factory(CONFIG)
    topic = unique_topic("txn-raw")
    ck_create_topic(b, topic, 1)
    with RawConn(b) as c:
        _, pid, epoch = init_pid(c, "c")
        for commit in (True, False, True):
            assert add_partitions(c, "c", pid, epoch, {topic: [0]}) == {(topic, 0): NONE}
            assert end_txn(c, "c", pid, epoch, commit) == NONE
            done = "CompleteCommit" if commit else "CompleteAbort"
            wait_for(lambda: describe_txn(c, "c")[1] == done, done)
            # A retried EndTxn with the same outcome succeeds; the other outcome does
            # not, as in Kafka (an abort after a commit succeeds only in librdkafka's
            # case, after a refused AddPartitionsToTxn: test_transactions.py).
            assert end_txn(c, "c", pid, epoch, commit) == NONE
            assert end_txn(c, "c", pid, epoch, not commit) == INVALID_TXN_STATE
            assert describe_txn(c, "c")[1] == done
        err, unknown, listed = list_txns(c, ["CompleteCommit", "Bogus"])
        assert (err, unknown, listed) == (NONE, ["Bogus"], {"c": (pid, "CompleteCommit")})
        assert list_txns(c, ["Ongoing"])[2] == {}


def test_bounds_on_ids_and_partitions(broker_factory):
    b = broker_factory(CONFIG)
    topic = unique_topic("txn-raw")
    ck_create_topic(b, topic, 5)
    with RawConn(b) as c:
        ids = [init_pid(c, f"id-{i}") for i in range(4)]
        assert all(e == NONE for e, _, _ in ids)
        # With a transaction open on every id, a fifth id is refused, clearly (an idle
        # id would be evicted for it: test_txn_bounds.py); a known id is still served.
        for i, (_, p, e) in enumerate(ids):
            assert add_partitions(c, f"id-{i}", p, e, {topic: [4]}) == {(topic, 4): NONE}
        assert init_pid(c, "id-4")[0] == POLICY_VIOLATION
        # A fencing InitProducerId aborts id-0's transaction first (retriable).
        wait_for(lambda: init_pid(c, "id-0")[0] == NONE, "id-0 re-initialised")
        _, _, pid, epoch, _ = describe_txn(c, "id-0")
        # More partitions than max_partitions_per_transaction (3): refused whole.
        assert set(add_partitions(c, "id-0", pid, epoch, {topic: [0, 1, 2, 3]}).values()) == {POLICY_VIOLATION}
        assert set(add_partitions(c, "id-0", pid, epoch, {topic: [0, 1]}).values()) == {NONE}
        assert set(add_partitions(c, "id-0", pid, epoch, {topic: [2, 3]}).values()) == {POLICY_VIOLATION}
        assert set(add_partitions(c, "id-0", pid, epoch, {topic: [2]}).values()) == {NONE}
    b.assert_alive()


def test_a_timed_out_transaction_is_aborted_also_after_kill9(broker_factory):
    b = broker_factory(CONFIG)
    topic = unique_topic("txn-raw")
    ck_create_topic(b, topic, 1)
    with RawConn(b) as c:
        _, pid, epoch = init_pid(c, "slow", timeout_ms=1000)
        _, pid2, epoch2 = init_pid(c, "kept", timeout_ms=60000)
        assert add_partitions(c, "slow", pid, epoch, {topic: [0]}) == {(topic, 0): NONE}
        assert add_partitions(c, "kept", pid2, epoch2, {topic: [0]}) == {(topic, 0): NONE}
        wait_for(lambda: describe_txn(c, "slow")[1] == "CompleteAbort", "the timeout abort")
        # The abort fenced the producer: its epoch was bumped.
        assert describe_txn(c, "slow")[3] == epoch + 1
        assert end_txn(c, "slow", pid, epoch, True) == PRODUCER_FENCED
        _, pid3, epoch3 = init_pid(c, "restart", timeout_ms=1500)
        assert add_partitions(c, "restart", pid3, epoch3, {topic: [0]}) == {(topic, 0): NONE}
    # The open transactions survive a kill -9; the short one still times out after it.
    b.kill9()
    b.start()
    with RawConn(b) as c:
        assert describe_txn(c, "kept")[1:] == ("Ongoing", pid2, epoch2, {topic: [0]})
        wait_for(lambda: describe_txn(c, "restart")[1] == "CompleteAbort", "the abort after restart")
        assert describe_txn(c, "kept")[1] == "Ongoing"
        assert end_txn(c, "kept", pid2, epoch2, True) == NONE
        wait_for(lambda: describe_txn(c, "kept")[1] == "CompleteCommit", "the commit")
    status, _, body = http_get(f"http://{b.host}:{b.admin_port}/v1/transactions")
    assert status == 200
    listed = {t["transactional_id"]: t for t in json.loads(body)["transactions"]}
    assert listed["kept"]["state"] == "CompleteCommit"
    assert listed["restart"]["state"] == "CompleteAbort"
    assert listed["restart"]["producer_epoch"] == epoch3 + 1
    _, _, metrics = http_get(f"http://{b.host}:{b.admin_port}/metrics")
    assert 'drover_transactions{state="CompleteAbort"} 2' in metrics
    assert "drover_transactions_aborted_by_timeout_total " in metrics
    assert 'drover_transactions_completed_total{result="commit"} 1' in metrics


def test_idle_transactional_ids_expire(broker_factory):
    b = broker_factory("[transactions]\ntransactional_id_expiration_ms = 500\n"
                       "transaction_abort_timed_out_transaction_cleanup_interval_ms = 100\n")
    with RawConn(b) as c:
        err, pid, _ = init_pid(c, "short-lived")
        assert err == NONE
        wait_for(lambda: describe_txn(c, "short-lived")[0] == TRANSACTIONAL_ID_NOT_FOUND, "the expiry")
        assert list_txns(c)[2] == {}
        # The id is new again: a new producer id at epoch 0.
        err, pid2, epoch = init_pid(c, "short-lived")
        assert (err, epoch) == (NONE, 0) and pid2 != pid
    _, _, metrics = http_get(f"http://{b.host}:{b.admin_port}/metrics")
    expired = [line for line in metrics.splitlines() if line.startswith("drover_transactional_ids_expired_total ")]
    assert expired and int(expired[0].split()[1]) >= 1, expired
