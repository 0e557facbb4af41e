"""The web console's cost at 10,000 groups (docs/benchmarks.md, "The web console"):
one broker with the coordinator, the embedded store and an admin token; `--groups`
groups each with committed offsets (an admin client's simple OffsetCommit per group,
confluent-kafka's `alter_consumer_group_offsets`); then, in alternation for
`--rounds` rounds of `--seconds` each:

- idle: no console open;
- console: headless chromium (Debian's, through chromedriver and selenium) signed in
  on the groups page, which polls `GET /v1/groups?page=0&size=50` every 3 s;

the broker's CPU seconds (utime + stime from /proc/<pid>/stat) per round, and their
ratio. Also the console's load time: from navigation to the first page of groups
drawn (sign-in included), and from a hash change to a group's page drawn, the median
of `--loads` loads each.

Usage: console_cpu.py --broker-bin PATH --plugins DIR [--groups N] [--rounds R]
           [--seconds S] [--loads L]
Run with target/test-venv/bin/python (scripts/bench-console.sh does).
"""

import argparse
import json
import secrets
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_broker import cpu_seconds, start_broker  # noqa: E402

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

def start(bin_path: str, plugin_dir: str, work: Path, token: str):
    (work / "token").write_text(token + "\n")
    (work / "token").chmod(0o600)
    proc, kafka, admin = start_broker(bin_path, plugin_dir, work, f"""
[admin]
token_file = "{work / 'token'}"
""")
    return proc, f"127.0.0.1:{kafka}", f"http://127.0.0.1:{admin}"


def make_groups(bootstrap: str, n: int, topic: str) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(30)
    pending = []
    for i in range(n):
        req = ConsumerGroupTopicPartitions(
            f"bench-group-{i:05d}", [TopicPartition(topic, p, 10 + i % 7) for p in range(4)])
        pending.append(admin.alter_consumer_group_offsets([req])[req.group_id])
        if len(pending) >= 200:
            for f in pending:
                f.result(60)
            pending = []
    for f in pending:
        f.result(60)


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def wait_css(driver, css: str, timeout: float = 120):
    WebDriverWait(driver, timeout, poll_frequency=0.02).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, css))


def load_groups_page(driver, admin_url: str, token: str) -> float:
    """Seconds from navigation to the groups page's first rows, signing in."""
    if driver.current_url.startswith(admin_url):
        driver.execute_script("sessionStorage.clear()")
    driver.get("about:blank")
    t0 = time.perf_counter()
    driver.get(admin_url + "/console/#/groups")
    driver.find_element(By.CSS_SELECTOR, "#token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#sign-in").click()
    wait_css(driver, "#groups-table tbody tr")
    return time.perf_counter() - t0


def load_group_page(driver, group: str) -> float:
    driver.execute_script("location.hash = '#/groups'")
    wait_css(driver, "#groups-table tbody tr")
    t0 = time.perf_counter()
    driver.execute_script("location.hash = arguments[0]", "#/group/" + group)
    wait_css(driver, "#partitions tbody tr")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--broker-bin", required=True)
    ap.add_argument("--plugins", required=True)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--loads", type=int, default=5)
    args = ap.parse_args()
    token = secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(prefix="bench-console-") as tmp:
        work = Path(tmp)
        proc, bootstrap, admin_url = start(args.broker_bin, args.plugins, work, token)
        try:
            t0 = time.time()
            make_groups(bootstrap, args.groups, "bench-console")
            print(f"{args.groups} groups with committed offsets in {time.time() - t0:.1f} s")
            req = urllib.request.Request(admin_url + "/v1/groups?size=1",
                                         headers={"Authorization": f"Bearer {token}"})
            total = json.load(urllib.request.urlopen(req, timeout=120))["total"]
            print(f"GET /v1/groups?size=1 reports total={total}")
            driver = browser()
            try:
                page = [load_groups_page(driver, admin_url, token) for _ in range(args.loads)]
                group = [load_group_page(driver, f"bench-group-{i:05d}")
                         for i in range(args.loads)]
                print(f"groups page load (sign-in included): median {statistics.median(page):.2f} s "
                      f"(min {min(page):.2f}, max {max(page):.2f})")
                print(f"group page load: median {statistics.median(group):.2f} s "
                      f"(min {min(group):.2f}, max {max(group):.2f})")
                idle, console = [], []
                for r in range(args.rounds):
                    driver.get("about:blank")
                    time.sleep(2)
                    c0 = cpu_seconds(proc.pid)
                    time.sleep(args.seconds)
                    idle.append(cpu_seconds(proc.pid) - c0)
                    driver.get(admin_url + "/console/#/groups")
                    wait_css(driver, "#groups-table tbody tr")
                    c0 = cpu_seconds(proc.pid)
                    time.sleep(args.seconds)
                    console.append(cpu_seconds(proc.pid) - c0)
                    print(f"round {r + 1}: broker CPU idle {idle[-1]:.2f} s, "
                          f"console open {console[-1]:.2f} s over {args.seconds:.0f} s")
                polls = args.seconds / 3
                extra = statistics.median(console) - statistics.median(idle)
                print(f"median broker CPU per {args.seconds:.0f} s: idle "
                      f"{statistics.median(idle):.2f} s, console {statistics.median(console):.2f} s "
                      f"(ratio {statistics.median(console) / max(statistics.median(idle), 1e-3):.1f}); "
                      f"the console costs {extra / args.seconds * 100:.1f} % of a core, "
                      f"{extra / polls * 1000:.0f} ms of CPU per poll of the groups page")
            finally:
                driver.quit()
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
