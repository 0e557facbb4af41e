"""A share group (KIP-932) assigned by a share assignor plugin (assignor ABI 3.3,
issue 31 item 2), with confluent-kafka 2.16's ShareConsumer.

The `recorder` fixture (tests/fixtures/recording-assignor) serves share groups: it
records the input and context of each call as JSON, with `"share": true`, and gives
every subscriber every partition of its topics, where the coordinator's `simple` would
split two partitions over three members. One group selects it
(`share_group_assignors`, plugin `drover-coordinator`); another, without an entry, runs
`simple` (`share_assignor`'s default):

- three share consumers of the selected group on a two-partition topic: every record
  delivered once, all three receive records, ShareGroupDescribe names `recorder` and
  shows each member fetching from both partitions, and the recorded call is a share
  group's with the broker's partition data (leaders) in its context;
- one consumer of the other group on the same topic: its assignor is `simple`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from conftest import install_plugins, start_or_fail
from drover_testlib import Msg, ck_create_topic, ck_produce
from kafka_groups_testlib import PLUGIN_LIBS, group_config
from share_groups_testlib import (SHARE, ShareMembers, poll_records, share_consumer,
                                  share_describe)
from share_groups_testlib import group_config as set_group_configs

RECORDER = "libdrover_fixture_recording_assignor.so"
FANNED, PLAIN = "share-fanned", "share-plain"
TIMEOUT = 60


def recorded(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def wait_for(what, timeout: float, why: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {why}")


def test_a_share_group_runs_the_share_assignor_plugin_it_selects(broker_factory, tmp_path):
    out = tmp_path / "recorded.json"
    config = (group_config(f'share_group_assignors = {{ "{FANNED}" = "recorder" }}\n',
                           **SHARE)
              + f'\n[plugins.config.recorder]\npath = "{out}"\n')
    b = broker_factory(config, start=False)
    install_plugins(b, PLUGIN_LIBS + [RECORDER])
    start_or_fail(b)
    topic = "share-assigned"
    ck_create_topic(b, topic, 2)
    for group in (FANNED, PLAIN):
        set_group_configs(b, group, share_auto_offset_reset="earliest")

    total = 600
    members = ShareMembers(b, FANNED, topic, 3)
    # Every member fetches from both partitions once the plugin's target is in force.
    def fanned():
        groups = share_describe(b, [FANNED])
        g = groups[0] if groups else None
        if g is None or g.error_code != 0 or len(g.members) != 3:
            return None
        if any(m.assignment.get(topic) != [0, 1] for m in g.members):
            return None
        return g
    g = wait_for(fanned, TIMEOUT, "all three members to hold both partitions")
    assert g.assignor == "recorder", g
    # Records arrive over time, on both partitions, so that every member's fetches
    # find some.
    for r in range(20):
        ck_produce(b, topic, [Msg(None, f"v-{r}-{i}".encode(), [], partition=i % 2)
                              for i in range(total // 20)])
        time.sleep(0.2)
    members.expect_each_once(total, TIMEOUT)

    # The plugin was called for the share group, with the broker's partition data.
    doc = recorded(out)
    assert doc is not None and doc["share"] is True, doc
    assert doc["group"] == FANNED, doc
    assert doc["topics"] == [{"name": topic, "partitions": 2, "committed": {}}], doc
    stats = doc["stats"][topic]
    assert sorted(stats) == ["0", "1"], doc
    assert all(p["leader"] is not None for p in stats.values()), doc

    # A group without an entry runs `simple`, the coordinator's own.
    c = share_consumer(b, PLAIN, topic)
    try:
        wait_for(lambda: poll_records(c, 0.5), TIMEOUT, "the plain group's first records")
        (plain,) = share_describe(b, [PLAIN])
        assert plain.assignor == "simple", plain
    finally:
        c.close()
