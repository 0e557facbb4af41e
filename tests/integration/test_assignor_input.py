"""What reaches an assignor plugin (issue 16): member racks, weights and labels, and the
context of assignor ABI 3.1 (labels, committed offsets).

The `recorder` fixture (tests/fixtures/recording-assignor) writes the `AssignInput` and
context it was handed as JSON to the path in its `[plugins.config.recorder]` table, then
deals partitions round-robin. Real clients join groups that name it:

- confluent-kafka KIP-848 consumers (`group.protocol=consumer`,
  `group.remote.assignor=recorder`) with `client.rack` set: the recorded members carry
  their racks (weight 1: the protocol has none); once one has consumed and committed,
  the next target assignment's context carries the group's committed offsets;
- native `drover consume` consumers with weights 1, 1, 2 in a group using the example
  `weighted` assignor (examples/custom-assignor) get 2, 2 and 4 of 8 partitions, read
  back from the admin API;
- native `drover consume` consumers with `--rack`, `--weight` and `--label`
  (RegisterConsumer v1): the recorded members carry all three, and once they have
  committed, a later rebalance's context carries the group's committed offsets;
- a broker with `[server] rack` and produced records: the context carries the broker's
  partition table (coordinator ABI 3.3): leader, its rack, log offsets, produce rates.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import install_plugins, start_or_fail
from connector_testlib import CONFIG as NATIVE_CONFIG
from connector_testlib import PLUGIN_LIBS as NATIVE_LIBS
from connector_testlib import (Consumers, admin_group, committed_offsets, consumer_args,
                               produce_keyed)
from connector_testlib import wait_for as native_wait_for
from drover_testlib import ck_create_topic
from kafka_groups_testlib import PLUGIN_LIBS as KAFKA_LIBS
from kafka_groups_testlib import consumers  # noqa: F401  (pytest fixture)
from kafka_groups_testlib import group_config, wait_for

RECORDER = "libdrover_fixture_recording_assignor.so"
WEIGHTED = "libdrover_example_weighted_assignor.so"


def recorder_table(path: Path) -> str:
    return f'\n[plugins.config.recorder]\npath = "{path}"\n'


def recorded(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def test_kip848_members_racks_reach_the_assignor(broker_factory, consumers, tmp_path):  # noqa: F811
    """Two confluent-kafka KIP-848 consumers with `client.rack` r-a and r-b in a group
    whose server assignor is `recorder`: the input it records lists both members with
    their racks (and weight 1)."""
    out = tmp_path / "recorded.json"
    b = broker_factory(group_config() + recorder_table(out), start=False)
    install_plugins(b, KAFKA_LIBS + [RECORDER])
    start_or_fail(b)
    topic, group = "racked", "g-racked"
    ck_create_topic(b, topic, 4)
    for name, rack in (("c1", "r-a"), ("c2", "r-b")):
        consumers.start("confluent", b, topic, group, name, protocol="consumer",
                        assignor="recorder", rack=rack)

    def both_racks():
        doc = recorded(out)
        if doc is None or len(doc["members"]) != 2:
            return False
        return doc
    doc = wait_for(both_racks, 60, "the recorder to see both members")
    assert doc["group"] == group, doc
    assert sorted(m["rack"] for m in doc["members"]) == ["r-a", "r-b"], doc
    assert [m["weight"] for m in doc["members"]] == [1, 1], doc
    assert all(m["topics"] == [topic] and m["labels"] == {} for m in doc["members"]), doc
    assert doc["topics"] == [{"name": topic, "partitions": 4, "committed": {}}], doc


def test_kip848_committed_offsets_reach_the_assignor(broker_factory, consumers, tmp_path):  # noqa: F811
    """A confluent-kafka KIP-848 consumer in a `recorder` group consumes 200 records,
    committing each; a second one joins: the target assignment its join triggers is
    computed with the group's committed offsets in the context (the offsets the
    coordinator saw written), as native groups' are."""
    out = tmp_path / "recorded.json"
    b = broker_factory(group_config() + recorder_table(out), start=False)
    install_plugins(b, KAFKA_LIBS + [RECORDER])
    start_or_fail(b)
    topic, group = "kip848-committed", "g-kip848-committed"
    ck_create_topic(b, topic, 4)
    produced = produce_keyed(b, topic, 200)
    c1 = consumers.start("confluent", b, topic, group, "c1", protocol="consumer",
                         assignor="recorder")

    def consumed():
        return len(set(c1.delivered())) >= len(produced)
    wait_for(consumed, 60, "the first consumer to receive every record")
    consumers.start("confluent", b, topic, group, "c2", protocol="consumer",
                    assignor="recorder")

    def committed_seen():
        doc = recorded(out)
        if doc is None or len(doc["members"]) != 2:
            return False
        return doc if doc["topics"][0]["committed"] else False
    doc = wait_for(committed_seen, 60, "a target assignment with committed offsets")
    ends: dict[int, int] = {}
    for p, o in produced:
        ends[p] = max(ends.get(p, 0), o + 1)
    committed = {int(p): o for p, o in doc["topics"][0]["committed"].items()}
    # What c1 committed: offsets of records it received, none past a partition's end.
    assert all(p in ends and 0 < o <= ends[p] for p, o in committed.items()), (committed, ends)


@pytest.fixture
def native_consumers(tmp_path, request):
    cs = Consumers(tmp_path)
    yield cs
    cs.stop_all()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print("\n" + cs.dump())


def test_native_member_data_and_committed_offsets_reach_the_assignor(broker_factory,
                                                                      native_consumers,
                                                                      tmp_path):
    """Three `drover consume` with racks a, a, b, weights 1, 1, 2 and a label on one:
    the recorder's input shows each member's rack and weight and its context the label.
    After they consumed and committed, a fourth consumer joins: that rebalance's context
    carries the group's committed offsets."""
    out = tmp_path / "recorded.json"
    b = broker_factory(NATIVE_CONFIG + recorder_table(out), start=False)
    install_plugins(b, NATIVE_LIBS + [RECORDER])
    start_or_fail(b)
    topic, group = "member-input", "g-member-input"
    ck_create_topic(b, topic, 4)
    produced = {(topic, p, o) for p, o in produce_keyed(b, topic, 200)}
    specs = {"a1": ("a", 1, ()), "a2": ("a", 1, ("--label", "tier=gold")), "b1": ("b", 2, ())}
    procs = {}
    for cid, (rack, weight, labels) in specs.items():
        extra = ("--assignor", "recorder", "--rack", rack, "--weight", str(weight), *labels)
        procs[cid] = native_consumers.start(cid, *consumer_args(b, group, "--topic", topic,
                                                                consumer_id=cid, extra=extra))

    def members(n):
        def check():
            doc = recorded(out)
            got = sorted(m["id"] for m in (doc or {}).get("members", []))
            return doc if len(got) == n else f"recorded members {got}"
        return check
    doc = native_wait_for("the recorder to see three members", members(3), 60,
                          check=native_consumers.assert_running)
    by_id = {m["id"]: m for m in doc["members"]}
    assert {cid: (m["rack"], m["weight"]) for cid, m in by_id.items()} == {
        "a1": ("a", 1), "a2": ("a", 1), "b1": ("b", 2)}, doc
    assert by_id["a2"]["labels"] == {"tier": "gold"}, doc
    assert by_id["a1"]["labels"] == {} and by_id["b1"]["labels"] == {}, doc

    def printed():
        have = {(ln.topic, ln.partition, ln.offset) for c in procs.values() for ln in c.lines()}
        missing = produced - have
        return True if not missing else f"{len(missing)} of {len(produced)} not printed"
    native_wait_for("every record to be printed", printed, 60,
                    check=native_consumers.assert_running)
    # Offsets reach the group with heartbeat answers; a fourth member's rebalance then
    # sees them in the context. A rebalance that ran before the first commit sees none,
    # so the fourth joins once the admin API shows the group's commits.
    def all_committed():
        got = committed_offsets(b, group)
        return True if len(got) == 4 and all(o for o in got.values()) else f"committed {got}"
    native_wait_for("the three consumers to commit", all_committed, 60,
                    check=native_consumers.assert_running)
    native_consumers.start("d1", *consumer_args(b, group, "--topic", topic, consumer_id="d1",
                                                extra=("--assignor", "recorder")))

    def committed_seen():
        doc = recorded(out)
        if doc is None or len(doc["members"]) != 4:
            return "waiting for the fourth member's rebalance"
        committed = doc["topics"][0]["committed"]
        return doc if committed else "no committed offsets in the context"
    doc = native_wait_for("a rebalance whose context has committed offsets", committed_seen,
                          60, check=native_consumers.assert_running)
    committed = {int(p): o for p, o in doc["topics"][0]["committed"].items()}
    assert all(0 <= p < 4 and 0 < o <= 200 for p, o in committed.items()), doc


def test_weighted_assignor_follows_declared_weights(broker_factory, native_consumers):
    """Three `drover consume --assignor weighted` with `--weight` 1, 1 and 2 on a topic
    of 8 partitions: the admin API shows them owning 2, 2 and 4 (before member data
    reached assignors, every weight was 1 and the split was 3, 3, 2)."""
    b = broker_factory(NATIVE_CONFIG, start=False)
    install_plugins(b, NATIVE_LIBS + [WEIGHTED])
    start_or_fail(b)
    topic, group = "weighed", "g-weighed"
    ck_create_topic(b, topic, 8)
    for cid, weight in (("w1", 1), ("w2", 1), ("w3", 2)):
        extra = ("--assignor", "weighted", "--weight", str(weight))
        native_consumers.start(cid, *consumer_args(b, group, "--topic", topic,
                                                   consumer_id=cid, extra=extra))

    def split():
        g = admin_group(b, group) or {}
        counts = {m["consumer_id"]: len(m["partitions"]) for m in g.get("members", [])}
        if counts == {"w1": 2, "w2": 2, "w3": 4}:
            return True
        return f"partitions per member {counts}"
    native_wait_for("the assignment to follow the weights", split, 60,
                    check=native_consumers.assert_running)


def test_partition_leader_rack_log_end_and_produce_rate_reach_the_assignor(
        broker_factory, native_consumers, tmp_path):
    """A broker with `[server] rack` set; records produced by confluent-kafka into
    partition 0 of a 2-partition topic; a `drover consume --assignor recorder` joins:
    the context it records (coordinator ABI 3.3's partition table) shows for partition
    0 this broker as leader with its rack, a log end at the records produced and a
    produce rate above zero, for the untouched partition 1 a log end of 0 and no rate
    yet, and the age of the partition data."""
    out = tmp_path / "recorded.json"
    config = (NATIVE_CONFIG + recorder_table(out)
              + '\n[server]\nrack = "rack-x"\n'
              + '\n[coordinator]\npartition_stats_interval_ms = 200\n')
    b = broker_factory(config, start=False)
    install_plugins(b, NATIVE_LIBS + [RECORDER])
    start_or_fail(b)
    topic, group = "measured", "g-measured"
    ck_create_topic(b, topic, 2)
    produced = produce_keyed(b, topic, 100, partition=0)
    assert len(produced) == 100 and {p for p, _ in produced} == {0}

    def measured():
        doc = recorded(out)
        if doc is None:
            return "no assignment recorded yet"
        p0 = doc.get("stats", {}).get(topic, {}).get("0")
        if not p0 or not p0["log_end_offset"]:
            return f"partition 0 not measured yet: {p0}"
        return doc
    # The table reaches the coordinator every 200 ms; a rebalance that ran before the
    # first table after the produce sees none, so another member joins until one does.
    doc = None
    for i in range(3):
        cid = f"m{i}"
        native_consumers.start(cid, *consumer_args(b, group, "--topic", topic, consumer_id=cid,
                                                   extra=("--assignor", "recorder")))
        try:
            doc = native_wait_for("a rebalance whose context has the partition table",
                                  measured, 20, check=native_consumers.assert_running)
            break
        except AssertionError:
            continue
    assert doc is not None, recorded(out)
    p0, p1 = doc["stats"][topic]["0"], doc["stats"][topic]["1"]
    assert p0["leader"] is not None and p0["leader"] == p1["leader"], doc
    assert p0["leader_rack"] == "rack-x", doc
    assert p0["log_start_offset"] == 0 and p0["log_end_offset"] == 100, doc
    assert p0["produce_bytes_per_sec"] > 0 and p0["produce_records_per_sec"] > 0, doc
    # Partition 1 had no append and the rate window (60 s) has not passed since the
    # broker started: its rate is not measured yet (issue 28 item 3), not a 0.
    assert p1["log_end_offset"] == 0 and p1["produce_records_per_sec"] is None, doc
    # How old the partition data was when the assignor ran (assignor ABI 3.2).
    assert isinstance(doc["partition_data_age_ms"], int), doc
    assert 0 <= doc["partition_data_age_ms"] < 60_000, doc
