"""One release broker for the Python benches (ck_share.py, console_cpu.py): the
coordinator plugin, `range` and the embedded store copied into a private plugin
directory, started on free loopback ports, and its CPU seconds read from /proc."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

PLUGINS = ["libdrover_coordinator.so", "libdrover_assignor_range.so",
           "libdrover_offsets_embedded.so"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """utime + stime of process `pid`, seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_broker(bin_path: str, plugin_dir: str, work: Path, extra_config: str = ""):
    """Starts `drover serve` in `work` with PLUGINS from `plugin_dir` and `extra_config`
    (TOML tables) beside the `[plugins]` table; waits (60 s at most) for it to be ready
    and exits the bench if it is not. -> (process, Kafka port, admin port)."""
    kafka, admin = free_port(), free_port()
    plugins = work / "plugins"
    plugins.mkdir(mode=0o755)
    for name in PLUGINS:
        shutil.copy(Path(plugin_dir) / name, plugins / name)
        (plugins / name).chmod(0o644)
    (work / "drover.toml").write_text(extra_config + """
[plugins]
required = ["drover-coordinator", "range", "embedded"]
""")
    log = open(work / "broker.log", "wb")
    proc = subprocess.Popen([bin_path, "serve", "--listen", f"127.0.0.1:{kafka}",
                             "--admin-listen", f"127.0.0.1:{admin}",
                             "--data-dir", str(work / "data"), "--plugin-dir", str(plugins),
                             "--config", str(work / "drover.toml")],
                            stdout=log, stderr=log)
    deadline = time.time() + 60
    while b"drover ready" not in (work / "broker.log").read_bytes():
        if proc.poll() is not None or time.time() > deadline:
            sys.exit("the broker did not start: see " + str(work / "broker.log"))
        time.sleep(0.1)
    return proc, kafka, admin
