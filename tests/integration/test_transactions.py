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

import pytest

from drover_testlib import ck_conf, ck_create_topic, http_get, unique_topic


def txn_producer(broker, tid: str, **extra):
    from confluent_kafka import Producer

    conf = ck_conf(broker, **{"transactional.id": tid, "transaction.timeout.ms": 60000,
                              "linger.ms": 5})
    conf.update(extra)
    return Producer(conf)


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
