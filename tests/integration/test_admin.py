"""The admin HTTP endpoint (/metrics, /v1/topics, /v1/plugins) and graceful shutdown.

Metric names are matched loosely (see the patterns below), but the exposition must be
valid Prometheus text: every sample line is `name{labels} value`."""

from __future__ import annotations

import json
import re

from drover_testlib import (API_PRODUCE, Msg, RawConn, check_partition_logs, ck_admin,
                            ck_consume, ck_create_topic, ck_produce, ck_topic_id, http_get,
                            make_messages, parse_produce_v3, produce_v3_request, record_batch,
                            unique_topic)

SAMPLE_RE = re.compile(
    r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)'
    r'(?:\{(?P<labels>(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*)\})?'
    r' (?P<value>[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|NaN|[+-]?Inf))(?: -?\d+)?$')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

# How the tests recognise the metrics the brief asks for (lower-case substrings).
REQUESTS_METRIC = "request"          # requests by API and error code
LOG_END_OFFSET_METRIC = "log_end_offset"
BYTES_IN_METRICS = ("bytes_in", "received_bytes", "in_bytes", "bytes_received", "request_bytes")
BYTES_OUT_METRICS = ("bytes_out", "sent_bytes", "out_bytes", "bytes_sent", "response_bytes")
CONNECTIONS_METRIC = "connection"


def parse_metrics(text: str) -> list[tuple[str, dict[str, str], float]]:
    samples = []
    declared: dict[tuple[str, str], int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith(("# TYPE ", "# HELP ")):
            kind, name = line.split()[1:3]
            # A scraper refuses a family declared twice ("second TYPE line for metric name").
            if (kind, name) in declared:
                raise AssertionError(f"/metrics line {n}: # {kind} {name} already given on "
                                     f"line {declared[(kind, name)]}")
            declared[(kind, name)] = n
            continue
        if not line.strip() or line.startswith("#"):
            continue
        m = SAMPLE_RE.match(line)
        assert m, f"/metrics line {n} is not a Prometheus sample: {line!r}"
        labels = dict(LABEL_RE.findall(m.group("labels") or ""))
        samples.append((m.group("name"), labels, float(m.group("value"))))
    return samples


def norm(s: str) -> str:
    return s.lower().replace("_", "").replace("-", "")


def requests_for(samples, api: str) -> float:
    """Sum of request counters whose labels name this API (Produce / produce / ...)."""
    total = 0.0
    for name, labels, value in samples:
        if REQUESTS_METRIC in name.lower() and not name.endswith(("_bucket", "_sum")) \
                and any(norm(v) == norm(api) for v in labels.values()):
            total += value
    return total


def test_metrics(broker):
    topic = unique_topic("adm-metrics")
    ck_create_topic(broker, topic, 2)
    msgs = [Msg(b"k", b"v%d" % i, partition=i % 2) for i in range(30)]
    ck_produce(broker, topic, msgs)
    ck_consume(broker, topic, {0: 15, 1: 15})

    status, ctype, body = http_get(broker.admin_url + "/metrics")
    assert status == 200
    # The body is OpenMetrics text (counter families without `_total`, samples with
    # it, a final `# EOF`), so it must say so: a scraper then picks the right parser.
    assert ctype.startswith("application/openmetrics-text"), ctype
    assert body.rstrip().endswith("# EOF"), body[-200:]
    samples = parse_metrics(body)
    assert samples, "no samples"

    for api in ("ApiVersions", "Metadata", "CreateTopics", "Produce", "Fetch"):
        assert requests_for(samples, api) > 0, f"no request counter for {api}"
    # Requests are broken down by error code too.
    assert any(REQUESTS_METRIC in n.lower() and any("error" in k for k in labels)
               for n, labels, _ in samples), "request counters carry no error-code label"

    leo = {(labels.get("topic"), labels.get("partition")): v
           for n, labels, v in samples if LOG_END_OFFSET_METRIC in n.lower()}
    assert leo.get((topic, "0")) == 15 and leo.get((topic, "1")) == 15, \
        f"log end offset gauges for {topic}: { {k: v for k, v in leo.items() if k[0] == topic} }"

    names = {n.lower() for n, _, _ in samples}
    assert any(p in n for n in names for p in BYTES_IN_METRICS), "no bytes-in metric"
    assert any(p in n for n in names for p in BYTES_OUT_METRICS), "no bytes-out metric"
    assert any(CONNECTIONS_METRIC in n for n in names), "no connections metric"
    bytes_in = sum(v for n, _, v in samples if any(p in n.lower() for p in BYTES_IN_METRICS))
    assert bytes_in > sum(len(m.value) for m in msgs)


def test_metrics_count_errors(broker):
    """A request that fails is counted under its error code, not as a success."""
    topic = unique_topic("adm-err")
    ck_create_topic(broker, topic, 1)
    with RawConn(broker) as c:
        corr = c.request(API_PRODUCE, 3, produce_v3_request(topic, 9, record_batch([(b"k", b"v")])))
        ((err, _),) = parse_produce_v3(c.recv_response(corr)).values()
    assert err == 3
    samples = parse_metrics(http_get(broker.admin_url + "/metrics")[2])
    errs = {labels.get(k) for n, labels, _ in samples if REQUESTS_METRIC in n.lower()
            for k in labels if "error" in k}
    assert {norm(e) for e in errs if e} & {"3", "unknowntopicorpartition"}, \
        f"error label values seen: {sorted(e for e in errs if e)}"


def find_strings(doc) -> set[str]:
    """Every string key and value anywhere in a JSON document."""
    out = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.add(k)
            out |= find_strings(v)
    elif isinstance(doc, list):
        for v in doc:
            out |= find_strings(v)
    elif isinstance(doc, str):
        out.add(doc)
    return out


def test_topics_endpoint(broker):
    topic = unique_topic("adm-topics")
    ck_create_topic(broker, topic, 3)
    status, ctype, body = http_get(broker.admin_url + "/v1/topics")
    assert status == 200
    assert "json" in ctype, ctype
    doc = json.loads(body)
    assert topic in find_strings(doc), f"{topic} not in /v1/topics: {body[:2000]}"
    ck_produce(broker, topic, [Msg(b"k", b"v", partition=2)])
    # Deleted topics disappear.
    admin = ck_admin(broker)
    admin.delete_topics([topic], operation_timeout=15, request_timeout=15)[topic].result(timeout=20)
    doc = json.loads(http_get(broker.admin_url + "/v1/topics")[2])
    assert topic not in find_strings(doc)


def test_plugins_endpoint_with_empty_plugin_dir(broker):
    status, ctype, body = http_get(broker.admin_url + "/v1/plugins")
    assert status == 200
    assert "json" in ctype, ctype
    json.loads(body)


def test_unknown_admin_path_is_404(broker):
    assert http_get(broker.admin_url + "/no/such/thing")[0] == 404


def test_sigterm_exits_0_and_restart_keeps_data(broker):
    topic = unique_topic("adm-term")
    ck_create_topic(broker, topic, 2)
    topic_id = ck_topic_id(broker, topic)
    msgs = make_messages(2000, seed=50)
    acks = ck_produce(broker, topic, msgs, codec="zstd")
    expected: dict[int, list] = {}
    for m, (p, off) in zip(msgs, acks):
        expected.setdefault(p, []).append((off, m))

    assert broker.terminate() == 0, "SIGTERM should shut down cleanly with status 0"
    broker.start()
    assert ck_topic_id(broker, topic) == topic_id
    got = ck_consume(broker, topic, {p: len(v) for p, v in expected.items()})
    check_partition_logs(expected, got)

    # Twice in a row, with a restart in between that did nothing.
    assert broker.terminate() == 0
    broker.start()
    more = ck_produce(broker, topic, [Msg(b"k", b"after", partition=0)])
    assert more == [(0, len(expected.get(0, [])))]
    assert broker.terminate() == 0
