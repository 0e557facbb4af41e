"""Transactions back to back with confluent-kafka: begin, one record to partition 0 of a
new topic, commit, N times; prints one JSON line with the seconds taken. The kafkajs
half is tests/integration/kafkajs_transactions.js. Used by scripts/bench-txn-back-to-back.sh
(docs/benchmarks.md, "Transactions back to back")."""
import sys, time, json
sys.path.insert(0, "tests/integration")
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
bootstrap, n = sys.argv[1], int(sys.argv[2])
topic = "ck-rate-%d" % int(time.time()*1000)
a = AdminClient({"bootstrap.servers": bootstrap}); a.create_topics([NewTopic(topic, 1, 1)])[topic].result(20)
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic, "linger.ms": 0})
p.init_transactions(30)
t = time.monotonic()
for i in range(n):
    p.begin_transaction(); p.produce(topic, b"x%d" % i, partition=0); p.commit_transaction(30)
print(json.dumps({"client": "confluent-kafka", "transactions": n, "seconds": time.monotonic() - t}))
