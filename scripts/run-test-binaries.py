#!/usr/bin/env python3
"""Runs the workspace's Rust test binaries several at a time, as `cargo test` would run
them one after another.

    scripts/run-test-binaries.py [--jobs N] [-- ARGS...]

`cargo test` runs its test binaries in sequence; most of their time is spent waiting on
real servers (ZooKeeper session expiry, PostgreSQL, a broker's timers), so on two cores
the sequence is mostly idle. This script asks cargo for the binaries
(`cargo test --workspace --no-run --message-format=json`, which builds nothing after
scripts/test.sh's build stage), then runs up to `--jobs` (default 3) of them at once,
each in its package's directory with the environment cargo gives it
(`CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`), the slowest of the last run first
(target/test-binary-times.json; alphabetical on a fresh clone). Within one binary the
tests share a process, as under `cargo test`: the per-process ZooKeeper and PostgreSQL
servers (tests/conformance/src/services) start once per binary, which a runner with a
process per test (cargo-nextest) would multiply.

Each binary's output is printed whole when it ends, with its wall time. Every binary
runs even when one fails (unlike `cargo test`, which stops at the first failing
target); the exit status is 1 when any failed, and the failures are listed at the end.
Doc-tests are not run here: `cargo test --workspace --doc` runs them.

ARGS after `--` go to every test binary (e.g. `-- --test-threads 1`).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The slowest binaries of a fresh clone's run (CI, 2026-12-07), for the order when
# target/test-binary-times.json does not exist yet.
FRESH_CLONE_SECONDS = {
    "drover-tests test:compat": 297.0,
    "drover-tests test:plugin_template": 265.0,
    "drover-tests test:offset_store_conformance": 149.0,
    # The host's and the coordinator's test binaries, one each since session 20: about
    # the sum of plugins_test_cli 121, zookeeper_lent_session 90, share_delivery 53 and
    # the rest, over two test threads; simulation 60 and the other coordinator modules.
    "drover-host test:all": 160.0,
    "drover-coordinator test:all": 80.0,
}
TIMES = ROOT / "target" / "test-binary-times.json"


def test_binaries():
    """(name, executable, package manifest dir, package name) of each test binary."""
    out = subprocess.run(
        ["cargo", "test", "--workspace", "--no-run", "--message-format=json"],
        cwd=ROOT,
        check=True,
        stdout=subprocess.PIPE,
    ).stdout
    found = {}
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg["profile"]["test"]:
            continue
        target = msg["target"]
        manifest = Path(msg["manifest_path"]).parent
        package = msg["package_id"]
        # package_id: "path+file:///dir#name@version" or "...#version" (name = dir).
        frag = package.rsplit("#", 1)[-1]
        pkg_name = frag.split("@")[0] if "@" in frag else manifest.name
        kind = target["kind"][0]
        name = f"{pkg_name} {kind}:{target['name']}"
        found[msg["executable"]] = (name, msg["executable"], manifest, pkg_name)
    return sorted(found.values())


def run_one(binary, args):
    name, exe, manifest, pkg_name = binary
    env = dict(os.environ)
    env["CARGO_MANIFEST_DIR"] = str(manifest)
    env["CARGO_PKG_NAME"] = pkg_name
    deps = ROOT / "target" / "debug" / "deps"
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in [str(deps), env.get("LD_LIBRARY_PATH", "")] if p
    )
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as log:
        rc = subprocess.run(
            [exe, *args], cwd=manifest, env=env, stdout=log, stderr=subprocess.STDOUT
        ).returncode
        log.seek(0)
        text = log.read().decode("utf-8", "replace")
    return name, rc, time.monotonic() - t0, text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("args", nargs="*")
    opts = parser.parse_args()

    binaries = test_binaries()
    try:
        last = json.loads(TIMES.read_text())
    except (OSError, ValueError):
        last = {}
    # A fresh clone has no times of its own: the slow binaries of a fresh CI run (the
    # two that build plugins with cargo first, then the ones waiting on servers).
    for name, took in FRESH_CLONE_SECONDS.items():
        last.setdefault(name, took)
    binaries.sort(key=lambda b: -last.get(b[0], 0.0))
    print(f"== {len(binaries)} test binaries, {opts.jobs} at a time", flush=True)

    t0 = time.monotonic()
    times, failed = {}, []
    with ThreadPoolExecutor(max_workers=opts.jobs) as pool:
        futures = [pool.submit(run_one, b, opts.args) for b in binaries]
        for fut in as_completed(futures):
            name, rc, took, text = fut.result()
            times[name] = round(took, 1)
            status = "ok" if rc == 0 else f"FAILED (exit {rc})"
            print(f"\n---- {name}: {took:.1f} s, {status}")
            print(text, end="", flush=True)
            if rc != 0:
                failed.append(name)

    TIMES.parent.mkdir(parents=True, exist_ok=True)
    TIMES.write_text(json.dumps(times, indent=1, sort_keys=True))
    print(f"\n== test binaries: {time.monotonic() - t0:.0f} s; slowest:")
    for name, took in sorted(times.items(), key=lambda kv: -kv[1])[:8]:
        print(f"   {took:7.1f} s  {name}")
    if failed:
        print(f"== {len(failed)} test binaries FAILED:")
        for name in failed:
            print(f"   {name}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
