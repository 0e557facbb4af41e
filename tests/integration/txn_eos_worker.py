"""One instance of a consume-transform-produce application with exactly-once
semantics (KIP-447 style, as Kafka Streams' exactly_once_v2 and confluent-kafka's
examples do it): a read_committed consumer in a group, one transactional producer per
instance, and each batch's output records and input offsets committed in one
transaction with send_offsets_to_transaction. Run as a subprocess by
test_transactions.py so it can be killed with SIGKILL.

Usage: txn_eos_worker.py BOOTSTRAP GROUP IN_TOPIC OUT_TOPIC TRANSACTIONAL_ID STOP_FILE
Each input value v becomes the output value b"out-" + v, same key.
"""

from __future__ import annotations

import os
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def retrying(op, every_error: bool = False, attempts: int = 20):
    """`op()`, called again after a retriable error (any non-fatal one if
    `every_error`), at most `attempts` times."""
    for attempt in range(attempts):
        try:
            return op()
        except KafkaException as e:
            err = e.args[0]
            if err.fatal() or attempt == attempts - 1:
                raise
            if not (err.retriable() or every_error):
                raise
            time.sleep(0.2)


def main() -> None:
    bootstrap, group, in_topic, out_topic, tid, stop_file = sys.argv[1:7]
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": int(os.environ.get("EOS_SESSION_TIMEOUT_MS", "6000")),
        "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": "range",
    })
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": tid,
        "transaction.timeout.ms": 5000,
        "socket.timeout.ms": 5000,
        "linger.ms": 5,
    })
    producer.init_transactions(60)
    consumer.subscribe([in_topic])
    while not os.path.exists(stop_file):
        msgs = consumer.consume(num_messages=20, timeout=0.5)
        msgs = [m for m in msgs if m.error() is None]
        if not msgs:
            continue
        try:
            producer.begin_transaction()
            for m in msgs:
                producer.produce(out_topic, b"out-" + m.value(), key=m.key())
            ends: dict[tuple[str, int], int] = {}
            for m in msgs:
                ends[(m.topic(), m.partition())] = max(ends.get((m.topic(), m.partition()), 0), m.offset() + 1)
            positions = [TopicPartition(t, p, o) for (t, p), o in ends.items()]
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            # A retriable error (a timeout while the coordinator moves) is resumed by
            # calling again, as librdkafka asks; anything else is handled below.
            retrying(lambda: producer.commit_transaction(30))
        except KafkaException as e:
            err = e.args[0]
            if err.fatal():
                raise
            # Abort whatever is open (a transaction that failed for any reason, even a
            # retriable one given up on); with none open there is nothing to abort.
            try:
                retrying(lambda: producer.abort_transaction(30))
            except KafkaException as abort_error:
                if abort_error.args[0].fatal():
                    raise
            # Start again from what the group committed: the aborted batch is redone.
            committed = retrying(lambda: consumer.committed(consumer.assignment(), timeout=30),
                                 every_error=True)
            for tp in committed:
                if tp.offset >= 0:
                    consumer.seek(tp)
                else:
                    consumer.seek(TopicPartition(tp.topic, tp.partition, 0))
    consumer.close()


if __name__ == "__main__":
    main()
