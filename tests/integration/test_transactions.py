"""Transactional producers with a real client (issue 18): confluent-kafka's
transactional producer against the transaction coordinator.

- Zombie fencing: a second producer with the same transactional.id fences the first,
  whose next transactional request fails with a fatal fencing error.
- A producer restarting with the transactional.id of one whose transaction is open
  gets its producer id once the open transaction is aborted (CONCURRENT_TRANSACTIONS
  is retried by the client meanwhile), and ListTransactions/DescribeTransactions
  through the admin API show the state.

Before this change init_transactions() never completed: FindCoordinator answered
COORDINATOR_NOT_AVAILABLE for transactional ids.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from drover_testlib import ck_conf, ck_create_topic, http_get, unique_topic


def txn_producer(broker, tid: str, **extra):
    from confluent_kafka import Producer

    conf = ck_conf(broker, **{"transactional.id": tid, "transaction.timeout.ms": 60000,
                              "linger.ms": 5})
    conf.update(extra)
    return Producer(conf)


def stop_workers(stop, procs) -> None:
    """Asks the EOS workers to stop (the `stop` file) and waits; kills any that hang."""
    stop.write_text("stop")
    for pr in procs:
        try:
            pr.wait(30)
        except subprocess.TimeoutExpired:
            pr.kill()


def transactions(broker) -> dict[str, dict]:
    status, _, body = http_get(f"http://{broker.host}:{broker.admin_port}/v1/transactions")
    assert status == 200
    return {t["transactional_id"]: t for t in json.loads(body)["transactions"]}


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(broker):
    from confluent_kafka import KafkaError, KafkaException

    topic = unique_topic("txn-fence")
    ck_create_topic(broker, topic, 1)
    first = txn_producer(broker, "fence-me")
    first.init_transactions(30)
    first.begin_transaction()
    epoch_first = transactions(broker)["fence-me"]["producer_epoch"]

    second = txn_producer(broker, "fence-me")
    second.init_transactions(30)
    after = transactions(broker)["fence-me"]
    assert after["producer_epoch"] == epoch_first + 1

    # The zombie's next transactional request (AddPartitionsToTxn for this send) is
    # refused with PRODUCER_FENCED: a fatal error, reported by the commit.
    first.produce(topic, b"zombie")
    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(30)
    error = raised.value.args[0]
    assert error.fatal(), error
    assert error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                            KafkaError.INVALID_PRODUCER_EPOCH), error
    # The new producer is unaffected.
    second.begin_transaction()
    second.abort_transaction(30)
    assert transactions(broker)["fence-me"]["state"] in ("Empty", "CompleteAbort")
    broker.assert_alive()


def wait_states(broker, want: dict[str, set[str]], timeout: float = 30) -> dict[str, dict]:
    """Waits until each transactional id of `want` is in one of its states."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        got = transactions(broker)
        if all(got.get(t, {}).get("state") in states for t, states in want.items()):
            return got
        assert time.monotonic() < deadline, f"transactions not in {want}: {got}"
        time.sleep(0.1)


def consume_all(broker, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Every record value a consumer with `isolation.level` reads from the beginning of
    each partition up to its end (the high watermark, or for read_committed the last
    stable offset: every transaction of the test is complete when this is called)."""
    import time

    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(ck_conf(broker, **{"group.id": unique_topic("txn-reader"),
                                    "isolation.level": isolation,
                                    "enable.auto.commit": False,
                                    "auto.offset.reset": "earliest"}))
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: list[bytes] = []
        deadline = time.monotonic() + 60
        while True:
            positions = {tp.partition: tp.offset for tp in
                         c.position([TopicPartition(topic, p) for p in range(partitions)])}
            if all(positions[p] >= ends[p] for p in range(partitions)):
                return out
            assert time.monotonic() < deadline, f"stuck at {positions}, ends {ends}"
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            out.append(m.value())
    finally:
        c.close()


def test_commit_and_abort_interleaved_read_committed_sees_only_committed(broker):
    topic = unique_topic("txn-mixed")
    ck_create_topic(broker, topic, 2)
    p = txn_producer(broker, "mixed")
    p.init_transactions(30)
    committed, everything = [], []
    for i in range(6):
        p.begin_transaction()
        for j in range(10):
            value = b"%d-%d" % (i, j)
            p.produce(topic, value, partition=j % 2)
            everything.append(value)
        # Written before the outcome: aborted records are in the log too (a producer
        # aborting unsent records would just drop them).
        assert p.flush(30) == 0
        if i % 2 == 0:
            p.commit_transaction(30)
            committed += everything[-10:]
        else:
            p.abort_transaction(30)
    wait_states(broker, {"mixed": {"CompleteAbort"}})
    assert sorted(consume_all(broker, topic, 2, "read_committed")) == sorted(committed)
    assert sorted(consume_all(broker, topic, 2, "read_uncommitted")) == sorted(everything)
    _, _, metrics = http_get(f"http://{broker.host}:{broker.admin_port}/metrics")
    # Six transactions over two partitions: twelve markers.
    assert "drover_transaction_markers_written_total 12" in metrics
    assert 'drover_transactions_completed_total{result="commit"} 3' in metrics


def test_kill9_mid_transaction_the_open_transaction_is_aborted_after_its_timeout(broker_factory):
    b = broker_factory("[transactions]\ntransaction_abort_timed_out_transaction_cleanup_interval_ms = 200\n")
    topic = unique_topic("txn-crash")
    ck_create_topic(b, topic, 1)
    zombie = txn_producer(b, "crashing", **{"transaction.timeout.ms": 3000, "socket.timeout.ms": 3000})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    for j in range(10):
        zombie.produce(topic, b"open-%d" % j, partition=0)
    assert zombie.flush(30) == 0  # the records are in the log, the transaction open
    assert transactions(b)["crashing"]["state"] == "Ongoing"
    b.kill9()
    b.start()
    # After the restart the open transaction is aborted once its timeout has passed.
    wait_states(b, {"crashing": {"CompleteAbort"}})
    p = txn_producer(b, "after-crash")
    p.init_transactions(30)
    p.begin_transaction()
    for j in range(5):
        p.produce(topic, b"kept-%d" % j, partition=0)
    p.commit_transaction(30)
    wait_states(b, {"after-crash": {"CompleteCommit"}})
    assert sorted(consume_all(b, topic, 1, "read_committed")) == sorted(b"kept-%d" % j for j in range(5))
    assert len(consume_all(b, topic, 1, "read_uncommitted")) == 15


def test_consume_transform_produce_exactly_once_with_a_killed_instance(broker_factory, tmp_path):
    """Three instances of a consume-transform-produce application in one group, each
    with its own transactional id; one that has begun transactions is killed with
    SIGKILL mid-stream. Its open transaction is aborted by its timeout, its partitions move to the others, which
    resume from the group's committed offsets: the output holds every input record
    exactly once (read_committed), and the committed offsets are the input's ends."""
    import os
    import signal
    import sys
    import time

    from confluent_kafka import Consumer, TopicPartition

    from drover_testlib import ck_producer
    from test_native_group import CONFIG, install_plugins
    from conftest import start_or_fail

    b = broker_factory(CONFIG + "\n[transactions]\ntransaction_abort_timed_out_transaction_cleanup_interval_ms = 200\n",
                       start=False)
    install_plugins(b)
    start_or_fail(b)
    src, dst, group = unique_topic("eos-in"), unique_topic("eos-out"), unique_topic("eos-group")
    ck_create_topic(b, src, 3)
    ck_create_topic(b, dst, 3)
    n = 3000
    p = ck_producer(b)
    for i in range(n):
        p.produce(src, b"%06d" % i, key=b"%d" % i, partition=i % 3)
    assert p.flush(60) == 0
    stop = tmp_path / "stop"
    worker = os.path.join(os.path.dirname(__file__), "txn_eos_worker.py")
    procs = [subprocess.Popen([sys.executable, worker, b.bootstrap, group, src, dst, f"eos-{k}", str(stop)],
                              stdout=subprocess.DEVNULL, stderr=open(tmp_path / f"worker{k}.log", "wb"))
             for k in range(3)]
    try:
        # Kill one instance once output is flowing, one that has begun transactions
        # (under load an instance may not hold input partitions yet: it has none to
        # abort).
        deadline = time.monotonic() + 120
        while True:
            flowing = sum(hw for _, hw in (ck_watermarks_of(b, dst, 3)).values()) >= n // 3
            states = transactions(b)
            busy = [k for k in range(3)
                    if states.get(f"eos-{k}", {}).get("state") not in (None, "Empty")]
            if flowing and busy:
                break
            assert time.monotonic() < deadline, f"no output: {states}"
            time.sleep(0.2)
        victim = busy[0]
        procs[victim].send_signal(signal.SIGKILL)
        procs[victim].wait()
        # Wait until the group has committed the end of every input partition.
        c = Consumer(ck_conf(b, **{"group.id": group, "enable.auto.commit": False}))
        deadline = time.monotonic() + 180
        while True:
            committed = c.committed([TopicPartition(src, q) for q in range(3)], timeout=10)
            if all(tp.offset == n // 3 for tp in committed):
                break
            assert time.monotonic() < deadline, f"committed {committed}"
            assert all(pr.poll() is None for k, pr in enumerate(procs) if k != victim), \
                "a worker died"
            time.sleep(0.5)
        c.close()
    finally:
        stop_workers(stop, procs)
    wait_states(b, {f"eos-{k}": ({"CompleteAbort", "CompleteCommit"} if k == victim
                                 else {"CompleteCommit", "Empty"}) for k in range(3)})
    out = consume_all(b, dst, 3, "read_committed")
    assert sorted(out) == sorted(b"out-%06d" % i for i in range(n))


def ck_watermarks_of(broker, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    from drover_testlib import ck_watermarks

    return ck_watermarks(broker, topic, range(partitions))



def test_abort_right_after_produce_without_flush_200_rounds(broker):
    """abort_transaction() right after produce() (no flush: the client purges what it
    has not sent) in 200 rounds of random commit/abort, with short random pauses before
    the outcome: an abort just after a commit can find its AddPartitionsToTxn refused
    CONCURRENT_TRANSACTIONS (the commit still completing) and its EndTxn(abort) then
    meeting the completed commit. No round fails, and a read_committed consumer reads
    exactly the committed records.

    Before the fix that EndTxn was answered INVALID_TXN_STATE, a fatal error for
    librdkafka (librdkafka#4849).

    librdkafka ignores an AddPartitionsToTxn answer that arrives after
    abort_transaction() began and then sends no EndTxn, so the broker may be left with
    an Ongoing transaction holding no records; as Kafka does, it aborts that one at the
    transaction timeout (5 s here), so every id ends Complete*."""
    import random
    import time

    topic = unique_topic("txn-abort-now")
    ck_create_topic(broker, topic, 3)
    p = txn_producer(broker, "abort-now", **{"linger.ms": 0, "transaction.timeout.ms": 5000,
                                              "socket.timeout.ms": 5000})
    p.init_transactions(30)
    rng = random.Random(4849)
    pauses = [0, 0.001, 0.002, 0.003, 0.005, 0.008, 0.013]
    committed: list[bytes] = []
    for i in range(200):
        p.begin_transaction()
        values = [b"%d-%d" % (i, j) for j in range(rng.randint(1, 4))]
        parts = rng.sample(range(3), rng.randint(1, 3))
        for j, value in enumerate(values):
            p.produce(topic, value, partition=parts[j % len(parts)])
        time.sleep(rng.choice(pauses))
        if rng.random() < 0.5:
            p.commit_transaction(30)
            committed += values
        else:
            p.abort_transaction(30)
    wait_states(broker, {"abort-now": {"CompleteAbort", "CompleteCommit"}}, timeout=45)
    assert sorted(consume_all(broker, topic, 3, "read_committed")) == sorted(committed)
    broker.assert_alive()


def test_kafkajs_runs_transactions_back_to_back_without_an_error_line(broker):
    """kafkajs sends the next transaction's AddPartitionsToTxn right after EndTxn
    returns; the broker answers EndTxn once the transaction's (local) markers are
    complete (and would hold the next call until they are) instead of answering that
    call CONCURRENT_TRANSACTIONS, which kafkajs logs as an
    ERROR line and waits 300 ms for (issue 28 item 6). 50 transactions back to back:
    no ERROR line, and every committed record read back read_committed."""
    import shutil
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    modules = repo / "target" / "test-node" / "node_modules"
    node = shutil.which("node")
    if node is None or not (modules / "kafkajs" / "package.json").exists():
        pytest.skip("Node.js or kafkajs is not installed (scripts/install-test-deps.sh "
                    "installs them)")
    topic = unique_topic("txn-kafkajs")
    ck_create_topic(broker, topic, 1)
    out = subprocess.run(
        [node, str(Path(__file__).with_name("kafkajs_transactions.js")),
         f"{broker.host}:{broker.port}", topic, unique_topic("kjs"), "50"],
        capture_output=True, text=True, timeout=120,
        env={"NODE_PATH": str(modules), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["errors"] == [], result["errors"][:3]
    got = consume_all(broker, topic, 1, "read_committed")
    assert sorted(got) == sorted(b"txn-%d" % i for i in range(50))
    print(f"kafkajs: 50 transactions in {result['seconds']:.2f} s")
