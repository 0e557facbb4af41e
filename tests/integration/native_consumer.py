#!/usr/bin/env python3
"""A consumer speaking Drover's native group protocol (docs/protocol.md), for the
integration tests. Written from the document: it bootstraps with FindCoordinator,
registers on a coordinator channel and then serves the coordinator's Heartbeat,
StopFetcher and StartFetcher requests (section 6). Data is fetched with a
confluent-kafka Consumer under manual assignment (no Kafka group semantics).

    python native_consumer.py --bootstrap 127.0.0.1:9092 --group g --consumer-id c1 \\
        --topic orders --streams 2 --out c1.out [--events c1.events] ...

Every delivered record is appended to --out as a line "topic partition offset" with one
unbuffered write, so a kill -9 loses nothing already delivered. --events gets one JSON
object per state change (registered, start, stop, stop_all, lost, left, register_error)
and one ("sending") just before each frame it writes on the channel; "mono" is
CLOCK_MONOTONIC, comparable across processes. The log (stderr) has a timestamp on every
line.

Threads: the channel thread reads coordinator requests and answers them; the fetch
thread polls librdkafka and delivers. Both share `State` under one lock. A record is
delivered only if, under the lock, its partition is owned, its offset is the partition's
consumed offset (or later), and the lease (6.2) has not expired. StopFetcher removes
partitions under the lock before it answers, so nothing of them is delivered after.
The fetch thread alone calls librdkafka: with confluent-kafka 2.16, assign() and
get_watermark_offsets() from another thread block while a consume() is in progress, so
the channel thread hands such calls to the fetch thread (`in_fetcher`) and waits.

Exit status: 0 after a graceful leave (SIGTERM/SIGINT) or --max-runtime-s; 2 when the
coordinator refuses the registration with a non-retriable error (printed as
"REGISTER_ERROR <code> <NAME>: <message>"); 1 on an internal error.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import queue
import random
import signal
import socket
import sys
import threading
import time
import traceback
from typing import Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import native_protocol as np  # noqa: E402

log = logging.getLogger("native-consumer")

LEASE_MARGIN_S = 0.1  # stop delivering this much before the lease deadline
WATERMARK_TIMEOUT_S = 5.0
FETCHER_CALL_TIMEOUT_S = 30.0
POLL_TIMEOUT_S = 0.1
MAX_RESOLVE_TRIES = 3


class ChannelLost(Exception):
    pass


class RegisterRefused(Exception):
    def __init__(self, code: int, message: Optional[str]):
        self.code = code
        self.message = message
        super().__init__(f"REGISTER_ERROR {code} {np.error_name(code)}: {message}")


class State:
    """Everything both threads touch, under `lock`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # (topic, partition) -> consumed offset (next to deliver); None = not yet known
        self.owned: dict[tuple[str, int], Optional[int]] = {}
        # Owned partitions whose current position librdkafka has been told (assign);
        # records of the others may still come from an older position and are skipped.
        self.synced: set[tuple[str, int]] = set()
        self.generation = 0
        self.lease_deadline = 0.0  # monotonic; 0 = no channel, deliver nothing
        self.dead: Optional[str] = None  # why a fetcher died
        self.delivered = 0
        self.leaving = False


class NativeConsumer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.group = args.group
        self.consumer_id = args.consumer_id
        self.st_ms = args.session_timeout_ms
        self.state = State()
        self.stop_event = threading.Event()  # leave the group and exit
        self.fetch_stop = threading.Event()  # set after leaving: ends the fetch thread
        self.out_fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.events_fd = (os.open(args.events, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                          if args.events else None)
        self.channel: Optional[np.Conn] = None
        self.last_sent_start = 0.0
        self.kc = self._make_kafka_consumer()
        self.cmds: "queue.Queue" = queue.Queue()
        self.fetch_thread = threading.Thread(target=self.fetch_loop, name="fetch", daemon=True)

    # -- helpers ---------------------------------------------------------------------
    def event(self, kind: str, **kw) -> None:
        if self.events_fd is None:
            return
        rec = {"ts": time.time(), "mono": time.monotonic(), "event": kind,
               "consumer": self.consumer_id, **kw}
        os.write(self.events_fd, (json.dumps(rec) + "\n").encode())

    def _make_kafka_consumer(self):
        from confluent_kafka import Consumer
        conf = {
            "bootstrap.servers": self.args.bootstrap,
            # Required by librdkafka; never used to join a Kafka group (assign only).
            "group.id": f"drover-native-fetch-{self.consumer_id}",
            "client.id": f"native-{self.consumer_id}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            # Out-of-range is reported to us and resolved with auto_offset_reset (6.4).
            "auto.offset.reset": "error",
            "enable.partition.eof": False,
            "fetch.wait.max.ms": 100,
            "socket.timeout.ms": 10000,
            "allow.auto.create.topics": False,
        }
        return Consumer(conf)

    def _tps(self, owned: dict):
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition
        unknown = OFFSET_END if self.args.auto_offset_reset == "latest" else OFFSET_BEGINNING
        return [TopicPartition(t, p, unknown if off is None else off)
                for (t, p), off in sorted(owned.items())]

    def in_fetcher(self, fn, timeout: float = FETCHER_CALL_TIMEOUT_S):
        """Run fn on the fetch thread (the only one that calls librdkafka) and return
        its result; runs it here if that thread is this one or is gone."""
        if threading.current_thread() is self.fetch_thread or not self.fetch_thread.is_alive():
            return fn()
        done = threading.Event()
        box: dict = {}

        def wrapped():
            try:
                box["v"] = fn()
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller
                box["e"] = e
            finally:
                done.set()
        self.cmds.put(wrapped)
        deadline = time.monotonic() + timeout
        while not done.wait(0.05):
            if not self.fetch_thread.is_alive():
                # It ended; whatever it did not take is ours to run (no concurrency now).
                try:
                    while True:
                        self.cmds.get_nowait()()
                except queue.Empty:
                    pass
                break
            if time.monotonic() > deadline:
                raise ChannelLost(f"fetch thread did not run a call within {timeout:.0f} s")
        if "e" in box:
            raise box["e"]
        return box.get("v")

    def _sync_assignment(self) -> None:
        """Make librdkafka fetch exactly the owned partitions, from their consumed
        offsets (on the fetch thread)."""
        with self.state.lock:
            owned = dict(self.state.owned)
            if owned:
                self.kc.assign(self._tps(owned))
            else:
                self.kc.unassign()
            self.state.synced = set(owned)

    def sync_assignment(self) -> None:
        self.in_fetcher(self._sync_assignment)

    def _offsets_locked(self, keys=None):
        owned = self.state.owned
        keys = owned.keys() if keys is None else keys
        return np.dict_to_offsets({k: owned[k] for k in keys
                                   if k in owned and owned[k] is not None})

    def stop_all(self, why: str):
        """Stop fetching and delivering everything; returns the final offsets."""
        with self.state.lock:
            final = self._offsets_locked()
            had = sorted(self.state.owned)
            self.state.owned = {}
            self.state.lease_deadline = 0.0
        try:  # delivery has stopped (owned is empty); now stop fetching
            self.sync_assignment()
        except Exception as e:  # noqa: BLE001 - only logged
            log.warning("unassign failed: %s", e)
        if had:
            log.info("stopped all partitions (%s): %s", why, fmt_parts(had))
            self.event("stop_all", why=why, partitions=had, offsets=final)
        return final

    def resolve(self, topic: str, partition: int) -> Optional[int]:
        """auto_offset_reset for one partition via ListOffsets; None when it cannot."""
        from confluent_kafka import TopicPartition
        if self.args.auto_offset_reset == "none":
            return None
        last = None
        for _ in range(MAX_RESOLVE_TRIES):
            try:
                wm = self.kc.get_watermark_offsets(TopicPartition(topic, partition),
                                                   timeout=WATERMARK_TIMEOUT_S, cached=False)
                if wm is not None:
                    lo, hi = wm
                    return lo if self.args.auto_offset_reset == "earliest" else hi
            except Exception as e:  # noqa: BLE001
                last = e
            time.sleep(0.2)
        log.warning("cannot resolve %s-%d: %s", topic, partition, last)
        return None

    # -- the fetch thread ------------------------------------------------------------
    def fetch_loop(self) -> None:
        from confluent_kafka import KafkaError
        st = self.state
        while not self.fetch_stop.is_set():
            while True:
                try:
                    self.cmds.get_nowait()()
                except queue.Empty:
                    break
            try:
                msgs = self.kc.consume(num_messages=500, timeout=POLL_TIMEOUT_S)
            except RuntimeError as e:  # consumer closed
                log.info("fetch loop ends: %s", e)
                return
            if not msgs:
                continue
            reset_needed = []
            with st.lock:
                for m in msgs:
                    err = m.error()
                    key = (m.topic(), m.partition())
                    if err is not None:
                        if key in st.owned and err.code() in (
                                KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                            reset_needed.append((key, st.owned[key]))
                        else:
                            log.warning("fetch error on %s: %s", key, err)
                        continue
                    # Deliver only while the lease holds (6.2) and the partition is ours.
                    if time.monotonic() >= st.lease_deadline - LEASE_MARGIN_S:
                        break
                    if key not in st.owned or key not in st.synced:
                        continue  # stopped, or fetched before a reassignment
                    pos = st.owned[key]
                    off = m.offset()
                    if pos is not None and off < pos:
                        continue  # stale: buffered before a reposition
                    if pos is not None and off > pos:
                        log.info("%s-%d: offset gap %d -> %d", key[0], key[1], pos, off)
                    os.write(self.out_fd, f"{key[0]} {key[1]} {off}\n".encode())
                    st.owned[key] = off + 1
                    st.delivered += 1
            for key, pos in reset_needed:
                self._reset_partition(key, pos)

    def _reset_partition(self, key, pos) -> None:
        """An out-of-range position: apply auto_offset_reset, or fail the fetcher."""
        new = self.resolve(*key)
        with self.state.lock:
            if key not in self.state.owned or self.state.owned[key] != pos:
                return  # moved meanwhile
            if new is None:
                self.state.dead = f"{key[0]}-{key[1]}: offset {pos} out of range, " \
                                  f"auto_offset_reset={self.args.auto_offset_reset}"
                log.warning("fetcher died: %s", self.state.dead)
                del self.state.owned[key]
            else:
                log.info("%s-%d: offset %s out of range, reset to %d", key[0], key[1], pos, new)
                self.state.owned[key] = new
                self.state.synced.discard(key)
        self._sync_assignment()

    # -- the channel -------------------------------------------------------------------
    def run(self) -> int:
        backoff = 0.1
        self.max_deadline = deadline = time.monotonic() + self.args.max_runtime_s
        fetcher = self.fetch_thread
        fetcher.start()
        try:
            while not self.stop_event.is_set():
                if time.monotonic() > deadline:
                    log.info("max runtime reached")
                    break
                registered = False
                try:
                    registered = self.register()
                    backoff = 0.1
                    self.serve_channel()
                except RegisterRefused as e:
                    log.error("%s", e)
                    print(str(e), file=sys.stderr, flush=True)
                    self.event("register_error", code=e.code, name=np.error_name(e.code),
                               message=e.message)
                    return 2
                except (OSError, EOFError, np.ProtocolError, np.Malformed, np.CoordinatorError,
                        ChannelLost, TimeoutError) as e:
                    if self.stop_event.is_set():
                        break
                    self.channel_lost(f"{type(e).__name__}: {e}", registered)
                if self.stop_event.is_set():
                    break
                delay = backoff * random.uniform(0.8, 1.2)
                log.info("re-registering in %.2f s", delay)
                self.stop_event.wait(delay)
                backoff = min(backoff * 2, 10.0)
            self.leave()
            return 0
        finally:
            self.stop_event.set()
            self.fetch_stop.set()
            fetcher.join(timeout=5)
            try:
                if not fetcher.is_alive():
                    self.kc.close()
            except Exception:  # noqa: BLE001
                pass

    def register(self) -> bool:
        host, port = np.find_coordinator(self.args.find_coordinator_at or self.args.bootstrap,
                                         self.group)
        log.info("coordinator is %s:%d", host, port)
        self.coordinator = (host, port)
        conn = np.Conn(host, port, client_id=f"native-{self.consumer_id}")
        self.channel = conn
        a = self.args
        if a.whitelist is not None or a.blacklist is not None:
            kind = np.KIND_WHITELIST if a.whitelist is not None else np.KIND_BLACKLIST
            topics, pattern, pstreams = [], (a.whitelist if a.whitelist is not None else a.blacklist), a.streams
        else:
            kind, topics, pattern, pstreams = np.KIND_STATIC, [(t, a.streams) for t in a.topic], None, 0
        req = np.RegisterConsumerRequest(
            group_id=self.group, consumer_id=self.consumer_id, host=a.host,
            session_timeout_ms=self.st_ms, kind=kind, topics=topics, pattern=pattern,
            pattern_streams=pstreams, auto_offset_reset=np.RESET_BY_NAME[a.auto_offset_reset],
            assignor=a.assignor, rack=a.rack, weight=a.weight,
            labels=[tuple(kv.split("=", 1)) for kv in a.label])
        conn.corr += 1
        corr = conn.corr
        self.event("sending", api="RegisterConsumer", corr=corr)
        started = conn.send(np.encode_request(corr, conn.client_id, req), timeout=30)
        self.last_sent_start = started
        got, resp = np.decode_response(conn.recv_frame(30.0), np.REGISTER_CONSUMER)
        if got != corr:
            raise np.ProtocolError(f"RegisterConsumer: correlation id {got}, expected {corr}")
        if resp.error_code in (np.COORDINATOR_NOT_AVAILABLE, np.NOT_COORDINATOR):
            raise np.CoordinatorError(resp.error_code, "RegisterConsumer", resp.error_message)
        if resp.error_code != np.NONE:
            conn.close()
            raise RegisterRefused(resp.error_code, resp.error_message)
        with self.state.lock:
            self.state.generation = resp.generation
            self.state.lease_deadline = started + self.st_ms / 1000
            self.state.dead = None
        log.info("registered in group %s: generation %d, heartbeat interval %d ms",
                 self.group, resp.generation, resp.heartbeat_interval_ms)
        self.event("registered", generation=resp.generation,
                   heartbeat_interval_ms=resp.heartbeat_interval_ms, version=req.version())
        return True

    def serve_channel(self) -> None:
        conn = self.channel
        st = self.state
        while not self.stop_event.is_set():
            if time.monotonic() > self.max_deadline:
                log.info("max runtime reached")
                self.stop_event.set()
                return
            with st.lock:
                deadline = st.lease_deadline
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelLost("lease deadline passed")
            frame = conn.poll_frame(min(0.5, left))
            if frame is None:
                continue
            # A complete coordinator frame: the anchor moves to our previous frame.
            with st.lock:
                st.lease_deadline = self.last_sent_start + self.st_ms / 1000
            header, req = np.decode_request(frame)  # Malformed -> lost channel
            if header.api_key not in np.COORDINATOR_REQUESTS:
                raise ChannelLost(f"coordinator sent a {np.API_NAMES[header.api_key]} request")
            if header.api_key == np.HEARTBEAT:
                resp, lost = self.on_heartbeat(req)
            elif header.api_key == np.STOP_FETCHER:
                resp, lost = self.on_stop(req)
            else:
                resp, lost = self.on_start(req)
            if self.stop_event.is_set():
                return  # leaving: requests are left unanswered (6.7)
            # Logged before the write, so a kill cannot hide a frame that K received.
            self.event("sending", api=np.API_NAMES[header.api_key], corr=header.correlation_id,
                       error_code=resp.error_code)
            self.last_sent_start = conn.send(np.encode_response(header.correlation_id, resp))
            if lost:
                raise ChannelLost(lost)

    def _check(self, req, exact_generation: bool):
        """(error_code, why) for a group/generation mismatch, else (NONE, None)."""
        if req.group_id != self.group:
            return np.INVALID_GROUP_ID, f"group {req.group_id!r} is not {self.group!r}"
        gen = self.state.generation
        if exact_generation and req.generation != gen:
            return np.ILLEGAL_GENERATION, f"generation {req.generation}, mine is {gen}"
        if not exact_generation and req.generation <= gen:
            return np.ILLEGAL_GENERATION, f"generation {req.generation} not above mine ({gen})"
        return np.NONE, None

    def on_heartbeat(self, req: np.HeartbeatRequest):
        code, why = self._check(req, exact_generation=True)
        if code != np.NONE:
            self.stop_all(why)
            log.warning("Heartbeat refused: %s (%s)", np.error_name(code), why)
            return np.HeartbeatResponse(code, True, []), f"answered {np.error_name(code)}: {why}"
        with self.state.lock:
            dead = self.state.dead
        if dead is not None:
            final = self.stop_all(f"fetcher died: {dead}")
            log.warning("Heartbeat: fetchers unhealthy (%s)", dead)
            # Final offsets in both commit modes: this answer hands every partition
            # over (6.3 step 2, 5.3).
            return np.HeartbeatResponse(np.NONE, False, final), f"fetcher died: {dead}"
        with self.state.lock:
            offsets = self._offsets_locked() if self.auto_commit else []
        log.debug("Heartbeat gen %d: %s", req.generation, offsets)
        return np.HeartbeatResponse(np.NONE, True, offsets), None

    @property
    def auto_commit(self) -> bool:
        return not self.args.no_auto_commit

    def on_stop(self, req: np.StopFetcherRequest):
        code, why = self._check(req, exact_generation=True)
        if code != np.NONE:
            self.stop_all(why)
            log.warning("StopFetcher refused: %s (%s)", np.error_name(code), why)
            return np.StopFetcherResponse(code, []), f"answered {np.error_name(code)}: {why}"
        st = self.state
        with st.lock:
            if req.stop_all:
                keys = set(st.owned)
            else:
                listed = {(t, p) for t, parts in req.partitions for p in parts}
                keys = listed & set(st.owned)
            final = self._offsets_locked(keys)
            for k in keys:
                del st.owned[k]
            kept = sorted(st.owned)
        self.sync_assignment()  # no more fetch requests for them before we answer
        log.info("StopFetcher gen %d stop_all=%s: stopped %s, keep %s, final offsets %s",
                 req.generation, req.stop_all, fmt_parts(sorted(keys)), fmt_parts(kept),
                 fmt_offsets(final))
        self.event("stop", generation=req.generation, stop_all=req.stop_all,
                   stopped=sorted(keys), kept=kept, offsets=final)
        # In both commit modes (5.3): with --no-auto-commit these are the processed
        # offsets, which a CommitOffset after this answer could no longer commit.
        return np.StopFetcherResponse(np.NONE, final), None

    def on_start(self, req: np.StartFetcherRequest):
        code, why = self._check(req, exact_generation=False)
        st = self.state
        assignment = [(t, p, s) for t, parts in req.assignment for p, s in parts]
        if code == np.NONE:
            with st.lock:
                for t, p, s in assignment:
                    if s < -2 or (s == np.START_KEEP and (t, p) not in st.owned):
                        code, why = np.INVALID_REQUEST, f"start_offset {s} for {t}-{p}"
                        break
        if code != np.NONE:
            self.stop_all(why)
            log.warning("StartFetcher refused: %s (%s)", np.error_name(code), why)
            return np.StartFetcherResponse(code), f"answered {np.error_name(code)}: {why}"
        # Resolve -2 outside the lock (ListOffsets round trips).
        resolved: dict[tuple[str, int], Optional[int]] = {}
        dead = None
        for t, p, s in assignment:
            if s == np.START_RESET:
                resolved[(t, p)] = self.in_fetcher(lambda: self.resolve(t, p))
                if resolved[(t, p)] is None and self.args.auto_offset_reset == "none":
                    dead = f"{t}-{p}: nothing committed and auto_offset_reset=none"
        with st.lock:
            new: dict[tuple[str, int], Optional[int]] = {}
            for t, p, s in assignment:
                k = (t, p)
                if s >= 0:
                    new[k] = s
                elif s == np.START_KEEP:
                    new[k] = st.owned[k]
                elif resolved[k] is not None or self.args.auto_offset_reset != "none":
                    new[k] = resolved[k]  # None: librdkafka resolves it, first record sets it
            dropped = sorted(set(st.owned) - set(new))
            st.synced = {k for k in st.synced if k in new and new[k] == st.owned.get(k)}
            st.owned = new
            new = dict(new)  # the starting positions, for the log (the fetch thread moves them)
            st.generation = req.generation
            if dead is not None:
                st.dead = dead
        self.sync_assignment()
        streams = self.stream_map(sorted(new))
        log.info("StartFetcher gen %d: assignment %s (dropped %s); streams %s",
                 req.generation, fmt_starts(assignment, new), fmt_parts(dropped), streams)
        self.event("start", generation=req.generation,
                   assignment=[[t, p, s, new.get((t, p))] for t, p, s in assignment],
                   dropped=dropped)
        return np.StartFetcherResponse(np.NONE), None

    def stream_map(self, keys) -> dict[int, list[str]]:
        """Partitions spread over the application's streams (5.1): per topic for a
        static subscription, all together for a wildcard."""
        n = self.args.streams
        out: dict[int, list[str]] = {i: [] for i in range(n)}
        if self.args.whitelist is not None or self.args.blacklist is not None:
            for i, (t, p) in enumerate(keys):
                out[i % n].append(f"{t}-{p}")
        else:
            per_topic: dict[str, int] = {}
            for t, p in keys:
                i = per_topic.get(t, 0)
                per_topic[t] = i + 1
                out[i % n].append(f"{t}-{p}")
        return out

    def channel_lost(self, why: str, registered: bool) -> None:
        """6.6: stop everything, commit what we have (ignoring errors), close."""
        log.warning("channel lost: %s", why)
        final = self.stop_all(f"channel lost: {why}")
        with self.state.lock:
            gen = self.state.generation
            self.state.generation = 0
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        self.event("lost", why=why, generation=gen, offsets=final)
        if registered and final and self.auto_commit and getattr(self, "coordinator", None):
            try:
                with np.Conn(*self.coordinator, connect_timeout=5,
                             client_id=f"native-{self.consumer_id}") as c:
                    r = c.request(np.CommitOffsetRequest(self.group, self.consumer_id, gen, final),
                                  timeout=5)
                log.info("final CommitOffset (gen %d): %s", gen, r.topics)
            except Exception as e:  # noqa: BLE001 - ignored, as 6.6 says
                log.info("final CommitOffset failed (ignored): %s", e)

    def leave(self) -> None:
        """6.7: stop, commit the final offsets (whatever the commit mode), LeaveGroup on
        another connection, then close the channel."""
        final = self.stop_all("leaving")
        if self.channel is None:
            return
        with self.state.lock:
            gen = self.state.generation
        try:
            with np.Conn(*self.coordinator, connect_timeout=5,
                         client_id=f"native-{self.consumer_id}") as c:
                if final:
                    cr = c.request(np.CommitOffsetRequest(self.group, self.consumer_id, gen,
                                                          final), timeout=10)
                    log.info("final CommitOffset before leaving (gen %d): %s", gen, cr.topics)
                    self.event("committed", generation=gen, offsets=final,
                               codes=[[t, [[p, e] for p, e in parts]] for t, parts in cr.topics])
                r = c.request(np.LeaveGroupRequest(self.group, self.consumer_id), timeout=10)
            log.info("LeaveGroup: %s", np.error_name(r.error_code))
            self.event("left", code=r.error_code)
        except Exception as e:  # noqa: BLE001
            log.warning("LeaveGroup failed: %s", e)
        self.channel.close()
        self.channel = None


def fmt_parts(keys) -> str:
    return "[" + ", ".join(f"{t}-{p}" for t, p in keys) + "]"


def fmt_offsets(offsets) -> str:
    return "{" + ", ".join(f"{t}-{p}: {o}" for t, parts in offsets for p, o, _ in parts) + "}"


def fmt_starts(assignment, positions) -> str:
    return "[" + ", ".join(f"{t}-{p}@{s}" + (f"->{positions.get((t, p))}" if s < 0 else "")
                           for t, p, s in assignment) + "]"


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", required=True, help="HOST:PORT of any broker")
    ap.add_argument("--find-coordinator-at", metavar="HOST:PORT",
                    help="send FindCoordinator here instead of --bootstrap (for testing)")
    ap.add_argument("--group", required=True)
    ap.add_argument("--consumer-id", required=True)
    ap.add_argument("--topic", action="append", default=[], help="static subscription (repeatable)")
    ap.add_argument("--whitelist", help="wildcard subscription: whitelist regex")
    ap.add_argument("--blacklist", help="wildcard subscription: blacklist regex")
    ap.add_argument("--streams", type=int, default=1)
    ap.add_argument("--out", required=True, help="append 'topic partition offset' per record")
    ap.add_argument("--events", help="append one JSON object per state change")
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    ap.add_argument("--auto-offset-reset", choices=sorted(np.RESET_BY_NAME), default="earliest")
    ap.add_argument("--assignor", default=None)
    ap.add_argument("--host", default=socket.gethostname())
    ap.add_argument("--rack", default=None,
                    help="member data (RegisterConsumer v1, section 5.1): the rack")
    ap.add_argument("--weight", type=int, default=1, help="member data: the weight (>= 1)")
    ap.add_argument("--label", action="append", default=[], metavar="KEY=VALUE",
                    help="member data: a label (repeatable)")
    ap.add_argument("--no-auto-commit", action="store_true")
    ap.add_argument("--max-runtime-s", type=float, default=600)
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    if not a.topic and a.whitelist is None and a.blacklist is None:
        ap.error("give --topic, --whitelist or --blacklist")
    if any("=" not in kv for kv in a.label):
        ap.error("--label takes KEY=VALUE")
    return a


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stderr,
        format=f"%(asctime)s.%(msecs)03d [{args.consumer_id} %(threadName)s] %(levelname)s %(message)s",
        datefmt="%H:%M:%S")
    logging.getLogger("kafka").setLevel(logging.WARNING)
    c = NativeConsumer(args)

    def on_signal(signum, _frame):
        log.info("signal %d: leaving", signum)
        c.stop_event.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        return c.run()
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())
