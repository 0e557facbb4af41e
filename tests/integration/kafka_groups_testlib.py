"""Shared pieces of the Kafka group protocol tests (issue 8): a broker with the
coordinator plugin, and consumer processes of the real clients (confluent-kafka,
kafka-python, kcat) that record what they deliver."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path


from cluster_testlib import wait_until
from conftest import _die_with_parent, install_plugins, start_or_fail

HERE = Path(__file__).resolve().parent
GROUP_CONSUMER = HERE / "kafka_group_consumer.py"

PLUGIN_LIBS = [
    "libdrover_coordinator.so",
    "libdrover_assignor_range.so",
    "libdrover_assignor_round_robin.so",
    "libdrover_assignor_sticky.so",
    "libdrover_offsets_embedded.so",
]

# Short delays keep the tests quick; Kafka's defaults are 3000 ms and 45000 ms.
CONFIG = """\
[plugins]
required = ["drover-coordinator", "range", "round-robin", "sticky", "embedded"]

[plugins.config.drover-coordinator]
initial_rebalance_delay_ms = 300
min_session_timeout_ms = 1000
"""


def start_group_broker(broker_factory, extra: str = ""):
    b = broker_factory(CONFIG + extra, start=False)
    install_plugins(b, PLUGIN_LIBS)
    return start_or_fail(b)


@dataclass
class GroupConsumer:
    """A `kafka_group_consumer.py` process: one group member of a real client."""
    name: str
    proc: subprocess.Popen
    out: Path
    stderr: Path
    killed: bool = False

    def records(self) -> list[dict]:
        if not self.out.exists():
            return []
        out = []
        for line in self.out.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # a line being written
        return out

    def delivered(self) -> list[tuple[int, int]]:
        return [(r["p"], r["o"]) for r in self.records() if r.get("ev") == "msg"]

    def assignments(self) -> list[list[int]]:
        return [r["partitions"] for r in self.records() if r.get("ev") == "assigned"]

    def current(self) -> set[int] | None:
        """The partitions it holds now (from its assign/revoke callbacks)."""
        held: set[int] | None = None
        for r in self.records():
            if r.get("ev") == "assigned":
                held = (held or set()) | set(r["partitions"])
            elif r.get("ev") == "revoked":
                held = (held or set()) - set(r["partitions"])
        return held

    def kill(self) -> None:
        self.killed = True
        self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM: the client closes cleanly (commits, leaves unless static)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@dataclass
class Consumers:
    workdir: Path
    members: list[GroupConsumer] = field(default_factory=list)

    def start(self, client: str, broker, topic: str, group: str, name: str, **opts) -> GroupConsumer:
        out = self.workdir / f"{name}.jsonl"
        err = self.workdir / f"{name}.stderr"
        args = [sys.executable, str(GROUP_CONSUMER), "--client", client,
                "--bootstrap", broker.bootstrap, "--topic", topic, "--group", group,
                "--out", str(out)]
        for k, v in opts.items():
            args += [f"--{k.replace('_', '-')}", str(v)]
        with open(err, "wb") as e:
            proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=e,
                                    preexec_fn=_die_with_parent)
        c = GroupConsumer(name, proc, out, err)
        self.members.append(c)
        return c

    def stop_all(self) -> None:
        for c in self.members:
            if not c.killed:
                c.stop()

    def logs(self) -> str:
        parts = []
        for c in self.members:
            text = c.stderr.read_text(errors="replace") if c.stderr.exists() else ""
            parts.append(f"----- {c.name} (rc={c.proc.poll()}) -----\n{text[-4000:]}")
        return "\n".join(parts)


def wait_for(predicate, timeout: float, what: str):
    return wait_until(predicate, timeout, what, interval=0.2)
