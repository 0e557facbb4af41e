"""The main job, `drover demo`, end to end: a broker with the coordinator, sticky and
embedded plugins, real lines produced with a Kafka client, three `drover consume`
processes with one killed by SIGKILL midway, and the summary's verdict."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import drover_bin, link_plugin

PLUGIN_LIBS = [
    "libdrover_coordinator.so",
    "libdrover_assignor_sticky.so",
    "libdrover_offsets_embedded.so",
]
REPO = Path(__file__).resolve().parents[2]


def plugin_dir(tmp_path: Path) -> Path:
    src = drover_bin().parent
    missing = [n for n in PLUGIN_LIBS if not (src / n).exists()]
    if missing:
        pytest.fail(f"plugin libraries missing in {src}: {missing}", pytrace=False)
    dst = tmp_path / "plugins"
    dst.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(dst, 0o755)
    for n in PLUGIN_LIBS:
        link_plugin(src / n, dst / n)
    return dst


def run_demo(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(drover_bin()), "demo", "--plugin-dir", str(plugin_dir(tmp_path)), *extra],
        capture_output=True, text=True, timeout=170,
    )


def test_demo_delivers_every_line_with_a_consumer_killed_midway(tmp_path):
    # Real text shipped with the repository, produced as it is.
    inputs = ["docs/protocol.md", "docs/operations.md"]
    lines = sum(len((REPO / f).read_text().splitlines()) for f in inputs)
    args = []
    for f in inputs:
        args += ["--input", str(REPO / f)]
    result = run_demo(tmp_path, *args, "--rate", "1500")
    out = result.stdout
    assert result.returncode == 0, f"exit {result.returncode}\n{out}\n{result.stderr[-3000:]}"
    assert f"produced            {lines}" in out, out
    assert "missing             0" in out, out
    assert "killed demo-group-consumer-3 with SIGKILL" in out, out
    assert "consumer 3 killed (SIGKILL)      -> generation" in out, out
    assert out.count(" ok\n") == 6, out  # committed offset == log end, per partition
    assert "result: OK" in out, out


def test_demo_refuses_a_missing_input_file(tmp_path):
    result = run_demo(tmp_path, "--input", str(tmp_path / "nope.txt"))
    assert result.returncode == 1
    assert "cannot read input" in result.stderr and "nope.txt" in result.stderr, result.stderr
