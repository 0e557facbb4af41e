"""The web console on the admin listener (issue 32 item 1), in a real browser: Debian's
headless chromium driven by chromedriver through selenium.

- without the admin token the API refuses (401) and the console shows the sign-in form
  only; the console's files themselves carry a `default-src 'self'` policy;
- every page loads, after signing in, with no error in the browser's console;
- the lag a group's page shows is the lag `GET /v1/groups/{group}` reports;
- an offset reset through the group's page (preview, then apply) moves the committed
  offsets, and a kafka-python consumer of the group then resumes from them; the same
  reset of a group with a live member is refused (409);
- a rebalance caused by killing a native consumer (kill -9: its channel closes) appears
  on the group's timeline with its cause (and a classic group's join and leave on its);
  so does a killed KIP-848 member's (confluent-kafka, `group.protocol=consumer`): its
  session expires, and the rebalance shows with cause `session_expiry` and the
  partitions that moved;
- a share group's page (confluent-kafka ShareConsumer, KIP-932) shows its
  share-partitions as `GET /v1/groups/{group}` reports them (window, in flight,
  acknowledged, archived, lag) and offers no offset reset;
- kaskade, a terminal UI, run under tmux, lists Drover's topics, the group, its members
  and lag (`tmux capture-pane -p`).

Screenshots of each page are kept under target/test-artefacts/console/ (the test
command's artefacts). The token is made per test and never committed.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import conftest
from cluster_testlib import wait_until
from drover_testlib import Msg, ck_create_topic, ck_produce, unique_topic
from share_groups_testlib import poll_records, produce_values, share_consumer, share_group

selenium = pytest.importorskip("selenium")
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = "/usr/bin/chromedriver"
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or not os.path.exists(CHROMEDRIVER),
    reason="Debian's chromium and chromium-driver are needed (scripts/install-test-deps.sh)",
)

ARTEFACTS = Path(__file__).resolve().parents[2] / "target" / "test-artefacts" / "console"
PLUGIN_LIBS = [
    "libdrover_coordinator.so",
    "libdrover_assignor_range.so",
    "libdrover_assignor_round_robin.so",
    "libdrover_offsets_embedded.so",
]
PAGE_TIMEOUT_S = 30


# ---------------------------------------------------------------------------------
# Fixtures and helpers
# ---------------------------------------------------------------------------------
@pytest.fixture
def token(tmp_path) -> str:
    return secrets.token_urlsafe(24)


@pytest.fixture
def console_broker(broker_factory, tmp_path, token):
    """A broker with the coordinator, assignors, the embedded store and an admin token."""
    token_file = tmp_path / "admin-token"
    token_file.write_text(token + "\n")
    os.chmod(token_file, 0o600)
    config = (
        "[admin]\n"
        f'token_file = "{token_file}"\n\n'
        "[plugins]\n"
        'required = ["drover-coordinator", "range", "round-robin", "embedded"]\n\n'
        "[plugins.config.drover-coordinator]\n"
        "initial_rebalance_delay_ms = 300\n"
        "min_session_timeout_ms = 1000\n"
        # KIP-848 members killed in a test expire after 3 s, not Kafka's 45 s.
        "consumer_session_timeout_ms = 3000\n"
        "consumer_heartbeat_interval_ms = 500\n"
    )
    b = broker_factory(config, start=False)
    conftest.install_plugins(b, PLUGIN_LIBS)
    return conftest.start_or_fail(b)


def api(broker, path: str, token: str | None, *, method: str = "GET", body=None):
    """(status, parsed JSON or text) of one admin API call."""
    headers = {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = None
    if method != "GET":
        headers["Content-Type"] = "application/json"
        data = json.dumps(body if body is not None else {}).encode()
    req = urllib.request.Request(broker.admin_url + path, data=data, method=method,
                                 headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode(errors="replace")
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, text


@pytest.fixture
def browser(request):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(PAGE_TIMEOUT_S)
    yield driver
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        shot(driver, f"{request.node.name}-failed")
        print("browser console:", driver.get_log("browser"))
    driver.quit()


def shot(driver, name: str) -> Path:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTEFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def wait_for(driver, css: str, timeout: float = PAGE_TIMEOUT_S, text: str | None = None):
    """The first element matching `css` (containing `text`, if given) once it is there."""
    def found(d):
        for el in d.find_elements(By.CSS_SELECTOR, css):
            if text is None or text in el.text:
                return el
        return False
    return WebDriverWait(driver, timeout, poll_frequency=0.2).until(
        found, f"no {css!r}" + (f" containing {text!r}" if text else ""))


def severe(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def sign_in(driver, broker, token: str) -> None:
    driver.get(broker.admin_url + "/console/")
    wait_for(driver, "#token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#sign-in").click()
    wait_for(driver, "#overview-cards .card")
    assert not driver.find_element(By.CSS_SELECTOR, "#login").is_displayed()


def open_page(driver, hash_: str, ready_css: str, text: str | None = None):
    driver.execute_script("location.hash = arguments[0]", hash_)
    return wait_for(driver, ready_css, text=text)


def produce(broker, topic: str, partitions: int, per_partition: int) -> None:
    ck_create_topic(broker, topic, partitions)
    msgs = [Msg(key=None, value=f"v{p}-{i}".encode(), partition=p)
            for p in range(partitions) for i in range(per_partition)]
    ck_produce(broker, topic, msgs)


def kp_group_consume(broker, topic: str, group: str, count: int, **extra) -> list:
    """kafka-python consumes `count` records in `group` (subscribe), commits, closes."""
    from kafka import KafkaConsumer
    conf = dict(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False,
                auto_offset_reset="earliest", consumer_timeout_ms=20000,
                client_id="console-test", session_timeout_ms=6000,
                heartbeat_interval_ms=1000)
    conf.update(extra)
    c = KafkaConsumer(topic, **conf)
    got = []
    try:
        for rec in c:
            got.append(rec)
            if len(got) >= count:
                break
        c.commit()
    finally:
        c.close()
    return got


# ---------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------
def test_console_refuses_without_the_token(console_broker, token, browser):
    b = console_broker
    status, _ = api(b, "/v1/overview", None)
    assert status == 401
    status, _ = api(b, "/v1/overview", "not-" + token)
    assert status == 401
    with urllib.request.urlopen(b.admin_url + "/console/", timeout=10) as r:
        assert r.status == 200
        csp = r.headers["Content-Security-Policy"]
        page = r.read().decode()
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert token not in page

    browser.get(b.admin_url + "/console/")
    wait_for(browser, "#token").send_keys("not-" + token)
    browser.find_element(By.CSS_SELECTOR, "#sign-in").click()
    wait_for(browser, "#login-error", text="refused")
    assert browser.find_elements(By.CSS_SELECTOR, "#main *") == []
    assert browser.execute_script("return sessionStorage.length") == 0
    assert token not in browser.current_url
    shot(browser, "refused")


def test_every_page_loads_without_console_errors(console_broker, token, browser):
    b = console_broker
    topic, group = unique_topic("console"), "console-pages"
    produce(b, topic, 3, 10)
    kp_group_consume(b, topic, group, 12)

    sign_in(browser, b, token)
    shot(browser, "overview")
    open_page(browser, "#/topics", "#topics-table td", text=topic)
    shot(browser, "topics")
    open_page(browser, f"#/topic/{topic}", "#partitions td")
    wait_for(browser, "#configs td", text="retention.ms")
    shot(browser, "topic")
    open_page(browser, "#/groups", "#groups-table td", text=group)
    shot(browser, "groups")
    open_page(browser, f"#/group/{group}", "#partitions td", text=topic)
    shot(browser, "group")
    open_page(browser, "#/transactions", "#open-transactions table")
    shot(browser, "transactions")
    # A poll or two on every page.
    time.sleep(4)
    assert severe(browser) == []


def test_group_lag_shown_is_the_admin_apis(console_broker, token, browser):
    b = console_broker
    topic, group = unique_topic("console-lag"), "console-lag"
    produce(b, topic, 3, 10)
    kp_group_consume(b, topic, group, 7)
    status, detail = api(b, f"/v1/groups/{group}", token)
    assert status == 200
    want = {(p["topic"], p["partition"]): p["lag"] for p in detail["partitions"]}
    assert sum(want.values()) == 30 - 7

    sign_in(browser, b, token)
    open_page(browser, f"#/group/{group}", "#partitions td", text=topic)
    shown = {}
    for row in browser.find_elements(By.CSS_SELECTOR, "#partitions tbody tr"):
        cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
        shown[(cells[0], int(cells[1]))] = int(cells[5].replace(",", ""))
    assert shown == want
    assert wait_for(browser, "#total-lag").text == str(sum(want.values()))
    # A classic group's rebalances are recorded too: its member's join, then its leave.
    wait_for(browser, "#timeline li[data-cause='join']")
    wait_for(browser, "#timeline li[data-cause='leave']")
    shot(browser, "group-lag")
    assert severe(browser) == []


def test_share_group_page_shows_its_share_partitions(console_broker, token, browser):
    from confluent_kafka import AcknowledgeType

    b = console_broker
    topic = unique_topic("console-share")
    ck_create_topic(b, topic, 1)
    group = share_group(b, "console-share")
    produce_values(b, topic, [b"v%d" % i for i in range(10)])
    c = share_consumer(b, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        got = []
        deadline = time.monotonic() + PAGE_TIMEOUT_S
        while len(got) < 10 and time.monotonic() < deadline:
            batch = poll_records(c)
            for m in batch:
                got.append(m.offset())
                # 0-2 rejected (archived), 3-5 accepted, 6-9 held under their locks.
                if m.offset() <= 5:
                    c.acknowledge(m, AcknowledgeType.REJECT if m.offset() <= 2
                                  else AcknowledgeType.ACCEPT)
            if batch:
                c.commit_sync(30)
        assert sorted(got) == list(range(10)), got
        status, detail = api(b, f"/v1/groups/{group}", token)
        assert status == 200 and detail["protocol"] == "share", detail
        [p] = detail["share_partitions"]
        lag = (p["log_end_offset"] - p["start_offset"] - p["acknowledged_in_window"]
               - p["archived_in_window"])
        assert (p["start_offset"], p["in_flight"], lag) == (6, 4, 4), p

        sign_in(browser, b, token)
        open_page(browser, f"#/group/{group}", "#share-partitions td", text=topic)
        [row] = browser.find_elements(By.CSS_SELECTOR, "#share-partitions tbody tr")
        cells = [cell.text.replace(",", "") for cell in row.find_elements(By.TAG_NAME, "td")]
        # topic, partition, start, end, log end, lag, in flight, available, acknowledged,
        # archived, redelivered
        assert cells[:11] == [topic, "0", str(p["start_offset"]), str(p["end_offset"]),
                              str(p["log_end_offset"]), str(lag), str(p["in_flight"]),
                              str(p["available"]), str(p["acknowledged"]), str(p["archived"]),
                              "0"], cells
        assert wait_for(browser, "#total-lag").text == str(lag)
        # No committed-offset table and no offset reset for a share group.
        assert not browser.find_element(By.ID, "partitions").is_displayed()
        assert not browser.find_element(By.ID, "reset-preview-button").is_displayed()
        shot(browser, "share-group")
        assert severe(browser) == []
    finally:
        c.close()


def test_offset_reset_through_the_page_moves_the_commits(console_broker, token, browser):
    b = console_broker
    topic, group = unique_topic("console-reset"), "console-reset"
    produce(b, topic, 2, 10)
    kp_group_consume(b, topic, group, 20)
    status, detail = api(b, f"/v1/groups/{group}", token)
    assert {p["committed_offset"] for p in detail["partitions"]} == {10}

    sign_in(browser, b, token)
    open_page(browser, f"#/group/{group}", "#partitions td", text=topic)
    Select(browser.find_element(By.CSS_SELECTOR, "#reset-to")).select_by_value("offset")
    browser.find_element(By.CSS_SELECTOR, "#reset-value").send_keys("4")
    browser.find_element(By.CSS_SELECTOR, "#reset-preview-button").click()
    wait_for(browser, "#reset-preview td")
    rows = [[c.text for c in r.find_elements(By.TAG_NAME, "td")]
            for r in browser.find_elements(By.CSS_SELECTOR, "#reset-preview tbody tr")]
    assert sorted((r[0], r[1], r[2], r[3]) for r in rows) == [
        (topic, "0", "10", "4"), (topic, "1", "10", "4")]
    # The preview committed nothing.
    _, detail = api(b, f"/v1/groups/{group}", token)
    assert {p["committed_offset"] for p in detail["partitions"]} == {10}
    shot(browser, "reset-preview")
    browser.find_element(By.CSS_SELECTOR, "#reset-apply").click()
    wait_for(browser, "#action-result", text="committed 2 offsets")
    shot(browser, "reset-applied")
    _, detail = api(b, f"/v1/groups/{group}", token)
    assert {(p["partition"], p["committed_offset"]) for p in detail["partitions"]} == {(0, 4), (1, 4)}

    # A kafka-python consumer of the group resumes from the new offsets.
    got = kp_group_consume(b, topic, group, 12, auto_offset_reset="none")
    firsts = {}
    for rec in got:
        firsts.setdefault(rec.partition, rec.offset)
    assert firsts == {0: 4, 1: 4}
    assert severe(browser) == []


def test_reset_of_a_group_with_a_member_is_refused(console_broker, token):
    from kafka import KafkaConsumer
    b = console_broker
    topic, group = unique_topic("console-busy"), "console-busy"
    produce(b, topic, 1, 5)
    c = KafkaConsumer(topic, bootstrap_servers=b.bootstrap, group_id=group,
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      session_timeout_ms=6000, heartbeat_interval_ms=1000)
    try:
        wait_until(lambda: c.poll(timeout_ms=500) or c.assignment(), 30, "an assignment")
        status, body = api(b, f"/v1/groups/{group}/offsets/reset", token, method="POST",
                           body={"to": "earliest", "dry_run": True})
        assert status == 409, body
        assert "no members" in body["error"]
    finally:
        c.close()


def wait_for_rebalance(broker, token: str, group: str, cause: str) -> tuple[dict, dict]:
    """Waits (60 s at most) until `GET /v1/groups/{group}/rebalances` shows a finished
    rebalance with `cause`; returns the answer and the last such rebalance."""
    def finished():
        status, body = api(broker, f"/v1/groups/{group}/rebalances", token)
        if status != 200:
            return None
        done = [x for x in body["rebalances"]
                if x["cause"] == cause and x["duration_ms"] is not None]
        return (body, done[-1]) if done else None
    return wait_until(finished, 60, f"a finished `{cause}` rebalance of {group}")


def test_killed_consumer_rebalance_on_the_timeline(console_broker, token, browser, tmp_path):
    from test_native_group import Consumers
    b = console_broker
    topic, group = unique_topic("console-native"), "console-native"
    ck_create_topic(b, topic, 4)
    cs = Consumers(tmp_path, b)
    try:
        cs.start("c1", group, topic)
        cs.start("c2", group, topic)
        wait_until(lambda: all(cs.procs[c].owned()[1] for c in ("c1", "c2")), 60,
                   "both consumers own partitions")
        cs.kill9("c2")
        body, after_kill = wait_for_rebalance(b, token, group, "leave")
        assert after_kill["partitions_moved"] >= 1
        assert body["rebalances"][0]["cause"] == "join"

        sign_in(browser, b, token)
        open_page(browser, f"#/group/{group}", "#timeline li[data-cause='leave']")
        items = browser.find_elements(By.CSS_SELECTOR, "#timeline li")
        assert any("leave" in i.text and "partitions moved" in i.text for i in items)
        browser.execute_script("document.getElementById('timeline').scrollIntoView()")
        shot(browser, "timeline")
        assert severe(browser) == []
    finally:
        cs.stop_all()


def test_killed_kip848_member_rebalance_on_the_timeline(console_broker, token, browser,
                                                       tmp_path):
    """A KIP-848 group of confluent-kafka consumers (`group.protocol=consumer`): the
    second member's join moves partitions; a killed member's session expires, and that
    rebalance (cause `session_expiry`, the victim's partitions moved to the survivor)
    is on the admin API's timeline once the survivor has reconciled, and on the
    console's."""
    from kafka_groups_testlib import Consumers as GroupConsumers
    b = console_broker
    topic = unique_topic("console-kip848")
    group = f"g-{topic}"
    ck_create_topic(b, topic, 4)
    cs = GroupConsumers(tmp_path / "kip848")
    cs.workdir.mkdir()
    try:
        first = cs.start("confluent", b, topic, group, "m0", protocol="consumer")
        wait_until(lambda: first.current() == {0, 1, 2, 3}, 60, "m0 holds every partition")
        second = cs.start("confluent", b, topic, group, "m1", protocol="consumer")
        wait_until(lambda: second.current() and first.current()
                   and first.current() | second.current() == {0, 1, 2, 3}
                   and not first.current() & second.current(), 60,
                   "m0 and m1 share the partitions")
        status, body = api(b, f"/v1/groups/{group}/rebalances", token)
        assert status == 200, body
        joins = [x for x in body["rebalances"] if x["cause"] == "join"]
        assert joins and joins[0]["members"] == 1, body
        assert joins[0]["partitions_moved"] == 4, "four partitions gained an owner"
        assert any(x["members"] == 2 and x["partitions_moved"] >= 1 for x in joins), body

        lost = second.current()
        second.kill()
        _, expiry = wait_for_rebalance(b, token, group, "session_expiry")
        assert expiry["members"] == 1, expiry
        assert expiry["partitions_moved"] == len(lost), (expiry, lost)
        assert expiry["assignor"], expiry
        # The survivor's process reports what it holds a moment after it reconciled.
        wait_until(lambda: first.current() == {0, 1, 2, 3}, 60, "m0 holds every partition again")

        sign_in(browser, b, token)
        open_page(browser, f"#/group/{group}", "#timeline li[data-cause='session_expiry']")
        items = browser.find_elements(By.CSS_SELECTOR, "#timeline li")
        assert any("session_expiry" in i.text and "partitions moved" in i.text for i in items)
        shot(browser, "timeline-kip848")
        assert severe(browser) == []
    finally:
        cs.stop_all()


def test_kaskade_lists_topics_groups_members_and_lag(console_broker):
    from kafka import KafkaConsumer
    tmux = shutil.which("tmux")
    beside = Path(sys.executable).parent / "kaskade"  # the test venv's
    kaskade = str(beside) if beside.exists() else shutil.which("kaskade")
    if tmux is None or kaskade is None:
        pytest.skip("tmux and kaskade are needed (scripts/install-test-deps.sh)")
    b = console_broker
    topic, group = unique_topic("kaskade"), "kaskade-group"
    produce(b, topic, 2, 10)
    kp_group_consume(b, topic, group, 5)
    # A live member (kafka-python heartbeats from a thread of its own).
    member = KafkaConsumer(topic, bootstrap_servers=b.bootstrap, group_id=group,
                           enable_auto_commit=False, client_id="kaskade-member",
                           session_timeout_ms=10000, heartbeat_interval_ms=1000)
    session = "kaskade"
    # A tmux server of the test's own, its window 200 columns wide whatever the
    # server's default size.
    tmux_cmd = [tmux, "-L", f"drover-test-{os.getpid()}", "-f", "/dev/null"]
    # Without COLUMNS/LINES (pytest's workers may have them): kaskade takes the pane's.
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["TERM"] = "xterm-256color"
    try:
        wait_until(lambda: member.poll(timeout_ms=200, max_records=1) is not None
                   and member.assignment(), 30, "the member's assignment")
        subprocess.run([*tmux_cmd, "new-session", "-d", "-s", session, "-x", "200", "-y", "45",
                        f"{kaskade} admin -b {b.bootstrap}"], check=True, env=env)
        subprocess.run([*tmux_cmd, "set-option", "-t", session, "window-size", "manual"],
                       env=env)
        subprocess.run([*tmux_cmd, "resize-window", "-t", session, "-x", "200", "-y", "45"],
                       env=env)

        def screen() -> str:
            return subprocess.run([*tmux_cmd, "capture-pane", "-p", "-t", session],
                                  capture_output=True, text=True, env=env).stdout

        def showing(what: str, timeout: float = 60) -> str:
            deadline = time.monotonic() + timeout
            while True:
                text = screen()
                if what in text:
                    return text
                if time.monotonic() > deadline:
                    raise AssertionError(f"kaskade does not show {what!r}; the screen:\n{text}")
                time.sleep(0.5)

        ARTEFACTS.mkdir(parents=True, exist_ok=True)
        text = showing(topic)
        (ARTEFACTS / "kaskade-topics.txt").write_text(text)
        # Name, Partitions, Replicas, In Sync, Groups, Members, Records, Lag.
        row = next(line for line in text.splitlines() if topic in line)
        cells = row.replace("│", " ").split()
        assert cells[1:7] == ["2", "1", "1", "1", "1", "≈20"], row
        assert cells[7].lstrip("≈") == "15", row
        # The topic's tabs: Partitions, Configurations, Groups, Group Offsets, Members.
        subprocess.run([*tmux_cmd, "send-keys", "-t", session, "Enter"], env=env)
        showing("Group Members")
        for _ in range(2):
            subprocess.run([*tmux_cmd, "send-keys", "-t", session, "Right"], env=env)
        groups = showing("Coordinator")
        (ARTEFACTS / "kaskade-groups.txt").write_text(groups)
        assert any(group in line and "15" in line for line in groups.splitlines()), groups
        subprocess.run([*tmux_cmd, "send-keys", "-t", session, "Right"], env=env)
        offsets = showing("Committed")
        (ARTEFACTS / "kaskade-offsets.txt").write_text(offsets)
        lags = sorted(line.replace("│", " ").split()[-1] for line in offsets.splitlines()
                      if group in line)
        assert lags == ["10", "5"], offsets
        subprocess.run([*tmux_cmd, "send-keys", "-t", session, "Right"], env=env)
        members = showing("kaskade-member")
        (ARTEFACTS / "kaskade-members.txt").write_text(members)
    finally:
        subprocess.run([*tmux_cmd, "kill-server"], env=env, capture_output=True)
        member.close()


def test_config_change_through_the_api_is_kafkas(console_broker, token, browser):
    """The topic page's config change goes through IncrementalAlterConfigs' rules: what it
    sets, confluent-kafka's DescribeConfigs reads; a bad value is Kafka's INVALID_CONFIG."""
    from confluent_kafka.admin import AdminClient, ConfigResource
    b = console_broker
    topic = unique_topic("console-config")
    ck_create_topic(b, topic, 1)
    sign_in(browser, b, token)
    open_page(browser, f"#/topic/{topic}", "#configs td", text="retention.ms")
    browser.find_element(By.CSS_SELECTOR, "#config-name").send_keys("retention.ms")
    browser.find_element(By.CSS_SELECTOR, "#config-value").send_keys("3600000")
    browser.find_element(By.CSS_SELECTOR, "#config-apply").click()
    wait_for(browser, "#config-result", text="applied")
    wait_for(browser, "#configs td", text="3600000")
    shot(browser, "topic-config")
    res = ConfigResource("topic", topic)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    described = admin.describe_configs([res])[res].result(20)
    assert described["retention.ms"].value == "3600000"
    status, body = api(b, f"/v1/topics/{topic}/configs", token, method="POST",
                       body={"configs": [{"name": "retention.ms", "op": "set", "value": "soon"}]})
    assert status == 400 and body["error"].startswith("InvalidConfig"), body
    status, _ = api(b, "/v1/topics/no-such-topic/configs", token, method="POST",
                    body={"configs": [{"name": "retention.ms", "op": "delete"}]})
    assert status == 404
    assert severe(browser) == []


def test_delete_group_only_without_members(console_broker, token):
    from kafka import KafkaConsumer
    b = console_broker
    topic = unique_topic("console-delete")
    produce(b, topic, 1, 3)
    kp_group_consume(b, topic, "console-gone", 3)
    status, body = api(b, "/v1/groups/console-gone", token, method="DELETE")
    assert status == 200, body
    status, _ = api(b, "/v1/groups/console-gone", token)
    assert status == 404
    c = KafkaConsumer(topic, bootstrap_servers=b.bootstrap, group_id="console-busy-del",
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      session_timeout_ms=6000, heartbeat_interval_ms=1000)
    try:
        wait_until(lambda: c.poll(timeout_ms=500) or c.assignment(), 30, "an assignment")
        status, body = api(b, "/v1/groups/console-busy-del", token, method="DELETE")
        assert status == 409, body
    finally:
        c.close()
