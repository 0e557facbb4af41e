"""krafka's share consumer (KIP-932; krafka 0.28 from crates.io, a Rust client written
apart from librdkafka) as a second share-group client (issue 31's tests), through
`tests/clients/krafka-share`, a small command built here on first use into
target/krafka-client:

- a krafka share consumer and a confluent-kafka ShareConsumer in one share group on a
  one-partition topic: every record delivered once (implicit acknowledgement), and both
  clients receive records;
- krafka in explicit mode releasing each record's first delivery: each comes back once
  with delivery count 2, is accepted, and nothing is left for another member."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

from drover_testlib import ck_create_topic, unique_topic
from kafka_groups_testlib import start_group_broker
from share_groups_testlib import SHARE, poll_records, produce_values, share_consumer, share_group

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "tests" / "clients" / "krafka-share"
TARGET = ROOT / "target" / "krafka-client"
TIMEOUT = 60


@pytest.fixture(scope="module")
def krafka_share() -> Path:
    """The built krafka-share command (cargo build, offline when the registry's copies
    are already here; a build failure fails the tests: krafka builds on this machine)."""
    run = subprocess.run(["cargo", "build", "-q", "--locked", "--manifest-path",
                          str(CLIENT / "Cargo.toml"), "--target-dir", str(TARGET)],
                         capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stderr[-3000:]
    return TARGET / "debug" / "krafka-share"


@pytest.fixture
def broker(broker_factory):
    """A broker with the coordinator plugin, the assignors and the embedded store."""
    return start_group_broker(broker_factory, **SHARE)


def krafka(bin_: Path, b, group: str, topic: str, max_records: int, idle_ms: int,
           mode: str) -> subprocess.Popen:
    return subprocess.Popen([str(bin_), b.bootstrap, group, topic, str(max_records),
                             str(idle_ms), mode], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def records(out: str) -> list[tuple[int, int, str]]:
    """(offset, delivery count, value) of each record line; asserts the closing line."""
    lines = out.strip().splitlines()
    assert lines and lines[-1].startswith("done "), lines[-5:]
    got = []
    for line in lines[:-1]:
        offset, count, value = line.split(" ", 2)
        got.append((int(offset), int(count), value))
    assert int(lines[-1].split()[1]) == len(got)
    return got


def test_krafka_and_confluent_kafka_share_one_partition_each_record_once(broker, krafka_share):
    b = broker
    topic = unique_topic("share-krafka")
    ck_create_topic(b, topic, 1)
    group = share_group(b, "share-krafka")
    total = 600
    k = krafka(krafka_share, b, group, topic, total, 5000, "implicit")
    ck_got: list[bytes] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def confluent() -> None:
        try:
            c = share_consumer(b, group, topic)
            try:
                while not stop.is_set():
                    ck_got.extend(m.value() for m in poll_records(c, 0.5))
            finally:
                c.close()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=confluent, daemon=True)
    t.start()
    # Records arrive over time, so that both members' fetches find some.
    for r in range(20):
        produce_values(b, topic, [f"v-{r}-{i}".encode() for i in range(total // 20)])
        time.sleep(0.3)
    out, err = k.communicate(timeout=TIMEOUT + 30)
    assert k.returncode == 0, err[-3000:]
    stop.set()
    t.join(30)
    assert not errors, errors
    k_got = records(out)
    everything = sorted([v for _, _, v in k_got] + [v.decode() for v in ck_got])
    assert everything == sorted(f"v-{r}-{i}" for r in range(20) for i in range(total // 20))
    assert k_got and ck_got, (len(k_got), len(ck_got))
    assert {count for _, count, _ in k_got} == {1}


def test_krafka_release_once_then_accept_redelivers_with_count_two(broker, krafka_share):
    b = broker
    topic = unique_topic("share-krafka-rel")
    ck_create_topic(b, topic, 1)
    group = share_group(b, "share-krafka-rel")
    produce_values(b, topic, [f"r-{i}".encode() for i in range(10)])
    k = krafka(krafka_share, b, group, topic, 20, 3000, "release-once")
    out, err = k.communicate(timeout=TIMEOUT + 30)
    assert k.returncode == 0, err[-3000:]
    by_offset: dict[int, list[int]] = {}
    for offset, count, value in records(out):
        assert value == f"r-{offset}"
        by_offset.setdefault(offset, []).append(count)
    assert by_offset == {i: [1, 2] for i in range(10)}
    # Every record was accepted on its second delivery: nothing left for a new member.
    c = share_consumer(b, group, topic)
    try:
        deadline = time.monotonic() + 5
        late = []
        while time.monotonic() < deadline:
            late.extend(poll_records(c, 0.5))
        assert late == []
    finally:
        c.close()
