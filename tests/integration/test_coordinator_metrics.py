"""The coordinator's counters on `GET /metrics` (issue 15, "metrics that tell the truth"):
every counter docs/operations.md lists is exported from startup under
`drover_coordinator_events_total{name}`, the family's `# HELP` line says what each
counts, and a real client's classic group is counted under the documented names.

The counter list comes from the operations doc's table, so a counter added to
`drover_abi::coordinator::metrics` but missing there (or the reverse) fails here as well
as in the host's unit test."""

from __future__ import annotations

import re
from pathlib import Path

from drover_testlib import Msg, ck_create_topic, ck_produce, http_get, unique_topic
from kafka_groups_testlib import consumers, group_broker, wait_for  # noqa: F401 (fixtures)
from test_admin import parse_metrics

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
TABLE_HEADER = "| name | unit | what it counts |"
ROW = re.compile(r"^\| `([a-z0-9_]+)` \| ([^|]+) \| ([^|]+) \|$")
FAMILY = "drover_coordinator_events"


def documented_counters() -> dict[str, tuple[str, str]]:
    """name -> (unit, help) from the operations doc's coordinator counter table."""
    lines = DOC.read_text().splitlines()
    start = lines.index(TABLE_HEADER) + 2  # the header and the |---| line
    rows = {}
    for line in lines[start:]:
        m = ROW.match(line)
        if not m:
            break
        rows[m[1]] = (m[2], m[3])
    assert rows, f"no coordinator counters under {TABLE_HEADER!r} in {DOC}"
    return rows


def scrape(broker) -> str:
    status, _, body = http_get(broker.admin_url + "/metrics")
    assert status == 200, status
    return body


def coordinator_counters(body: str) -> dict[str, float]:
    return {labels["name"]: value for name, labels, value in parse_metrics(body)
            if name == f"{FAMILY}_total"}


def test_coordinator_metrics_export_every_documented_counter_with_its_help(group_broker):
    body = scrape(group_broker)
    counters = coordinator_counters(body)
    help_lines = [ln for ln in body.splitlines() if ln.startswith(f"# HELP {FAMILY} ")]
    assert len(help_lines) == 1, help_lines
    for name, (unit, help_text) in documented_counters().items():
        assert name in counters, f"{name} is not exported: {sorted(counters)}"
        assert f" {name} ({unit}): {help_text}" in help_lines[0], \
            f"the # HELP line does not describe {name}: {help_lines[0]}"


def test_coordinator_metrics_count_a_classic_group(group_broker, consumers):
    b = group_broker
    topic = unique_topic("coord-metrics")
    ck_create_topic(b, topic, 2)
    ck_produce(b, topic, [Msg(b"k", f"v{p}".encode(), [], partition=p) for p in range(2)])
    before = coordinator_counters(scrape(b))
    member = consumers.start("confluent", b, topic, f"g-{topic}", "ck-0",
                             session_timeout_ms=3000, assignor="range")
    wait_for(lambda: len(member.delivered()) == 2, 60, "the member to consume both records")
    after = coordinator_counters(scrape(b))
    assert set(after) >= set(documented_counters()), sorted(after)
    for name in ("classic_rebalances", "classic_generations"):
        assert after[name] >= before[name] + 1, (name, before[name], after[name])
