"""Shared pieces of the memory benches (rescan_memory.py, classic_churn_memory.py): a
`drover serve` in a scratch directory, and the broker's memory read from /proc."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

PLUGINS = ["libdrover_coordinator.so", "libdrover_assignor_range.so",
           "libdrover_offsets_embedded.so"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def memory(pid: int, cache: str | None = None) -> dict[str, int]:
    """kB of the broker's memory by where it is: VmRSS (`rss`), threads, anonymous memory
    in all (`anon`), of the main heap (`heap`), of other anonymous mappings — malloc
    arenas, thread stacks, large allocations — (`anon_maps`), and with `cache` (the
    plugin cache directory) the libraries' copy-on-write pages (`lib_anon`, which the
    kernel counts as anonymous) and their file pages (`lib_file`)."""
    out = {"rss": 0, "anon": 0, "heap": 0, "anon_maps": 0, "lib_anon": 0, "lib_file": 0,
           "threads": 0}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                out["rss"] = int(line.split()[1])
            elif line.startswith("Threads:"):
                out["threads"] = int(line.split()[1])
    name = ""
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            if not parts[0].endswith(":"):
                name = parts[5].strip() if len(parts) > 5 else ""
                continue
            library = cache is not None and name.startswith(cache)
            if parts[0] == "Anonymous:":
                kb = int(parts[1])
                out["anon"] += kb
                if name == "[heap]":
                    out["heap"] += kb
                elif library:
                    out["lib_anon"] += kb
                elif name == "" or name.startswith("[stack"):
                    out["anon_maps"] += kb
            elif parts[0] == "Rss:" and library:
                out["lib_file"] += int(parts[1])
    out["lib_file"] -= out["lib_anon"]
    return out


class Broker:
    """`drover serve` from `bin_dir` with `PLUGINS` (plus files `install` puts in the
    plugin directory before `start`), a plugin cache of its own, and `config` (TOML)."""

    def __init__(self, bin_dir: str, config: str, env: list[str]) -> None:
        self.bin = bin_dir
        self.work = tempfile.mkdtemp(prefix="drover-mem-bench-")
        os.chmod(self.work, 0o755)
        self.plugins = os.path.join(self.work, "plugins")
        self.cache = os.path.join(self.work, "cache")
        os.makedirs(self.plugins)
        os.chmod(self.plugins, 0o755)
        for p in PLUGINS:
            self.install(os.path.join(bin_dir, p), p)
        self.config = f'[plugins]\ncache_dir = "{self.cache}"\n\n{config}'
        self.env = dict(os.environ)
        for kv in env:
            k, v = kv.split("=", 1)
            self.env[k] = v
        self.port, self.admin = free_port(), free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.admin_url = f"http://127.0.0.1:{self.admin}"
        self.log = os.path.join(self.work, "log")
        self.proc: subprocess.Popen | None = None

    def install(self, source: str, name: str) -> None:
        """Copies `source` into the plugin directory as `name`, replacing a file of that
        name the way package managers do (a rename over it)."""
        tmp = os.path.join(self.plugins, ".new")
        shutil.copy(source, tmp)
        os.chmod(tmp, 0o644)
        os.rename(tmp, os.path.join(self.plugins, name))

    def start(self) -> None:
        path = os.path.join(self.work, "drover.toml")
        with open(path, "w") as f:
            f.write(self.config)
        self.proc = subprocess.Popen(
            [os.path.join(self.bin, "drover"), "serve", "--config", path,
             "--listen", self.bootstrap, "--admin-listen", f"127.0.0.1:{self.admin}",
             "--data-dir", os.path.join(self.work, "data"), "--plugin-dir", self.plugins],
            stdout=open(self.log, "w"), stderr=subprocess.STDOUT, env=self.env)
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{self.admin_url}/v1/plugins", timeout=2)
                return
            except OSError:
                time.sleep(0.2)
        raise SystemExit(f"the broker did not start: {open(self.log).read()}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.work, ignore_errors=True)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    a = AdminClient({"bootstrap.servers": bootstrap})
    for f in a.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)
