"""The native coordinator protocol (docs/protocol.md), consumer and coordinator sides,
written from the document alone: message encoders/decoders, framing, a bounded frame
reader, a small blocking connection, and raw FindCoordinator v0 for bootstrapping.

Every length and count read from the wire is checked against the caps of section 8 and
against what the remaining bytes can hold before anything is allocated. Anything that
breaks section 8 raises `Malformed`.

Run `python native_protocol.py` for the self-check (section 9's worked example, byte
for byte, plus round trips and malformed-input checks).
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

# ---------------------------------------------------------------------------------
# Section 3: API keys (all version 0)
# ---------------------------------------------------------------------------------
REGISTER_CONSUMER = 20000
HEARTBEAT = 20001
STOP_FETCHER = 20002
START_FETCHER = 20003
COMMIT_OFFSET = 20004
FETCH_OFFSETS = 20005
LEAVE_GROUP = 20006
DESCRIBE_GROUPS = 20007

API_NAMES = {
    REGISTER_CONSUMER: "RegisterConsumer",
    HEARTBEAT: "Heartbeat",
    STOP_FETCHER: "StopFetcher",
    START_FETCHER: "StartFetcher",
    COMMIT_OFFSET: "CommitOffset",
    FETCH_OFFSETS: "FetchOffsets",
    LEAVE_GROUP: "LeaveGroup",
    DESCRIBE_GROUPS: "DescribeGroups",
}
# K -> C on the channel
COORDINATOR_REQUESTS = (HEARTBEAT, STOP_FETCHER, START_FETCHER)

# Kafka FindCoordinator (bootstrap, section 4)
FIND_COORDINATOR = 10

# ---------------------------------------------------------------------------------
# Section 5.1 enumerations
# ---------------------------------------------------------------------------------
KIND_STATIC, KIND_WHITELIST, KIND_BLACKLIST = 0, 1, 2
RESET_EARLIEST, RESET_LATEST, RESET_NONE = 0, 1, 2
RESET_BY_NAME = {"earliest": RESET_EARLIEST, "latest": RESET_LATEST, "none": RESET_NONE}

# Section 5.4 special start offsets
START_KEEP = -1
START_RESET = -2

# ---------------------------------------------------------------------------------
# Section 7: error codes
# ---------------------------------------------------------------------------------
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
INVALID_REQUEST = 42
GROUP_ID_NOT_FOUND = 69
GROUP_MAX_SIZE_REACHED = 81
INVALID_REGULAR_EXPRESSION = 128

ERROR_NAMES = {
    v: k for k, v in dict(
        NONE=NONE,
        UNKNOWN_TOPIC_OR_PARTITION=UNKNOWN_TOPIC_OR_PARTITION,
        OFFSET_METADATA_TOO_LARGE=OFFSET_METADATA_TOO_LARGE,
        COORDINATOR_NOT_AVAILABLE=COORDINATOR_NOT_AVAILABLE,
        NOT_COORDINATOR=NOT_COORDINATOR,
        ILLEGAL_GENERATION=ILLEGAL_GENERATION,
        INCONSISTENT_GROUP_PROTOCOL=INCONSISTENT_GROUP_PROTOCOL,
        INVALID_GROUP_ID=INVALID_GROUP_ID,
        UNKNOWN_MEMBER_ID=UNKNOWN_MEMBER_ID,
        INVALID_SESSION_TIMEOUT=INVALID_SESSION_TIMEOUT,
        REBALANCE_IN_PROGRESS=REBALANCE_IN_PROGRESS,
        INVALID_REQUEST=INVALID_REQUEST,
        GROUP_ID_NOT_FOUND=GROUP_ID_NOT_FOUND,
        GROUP_MAX_SIZE_REACHED=GROUP_MAX_SIZE_REACHED,
        INVALID_REGULAR_EXPRESSION=INVALID_REGULAR_EXPRESSION,
    ).items()
}


def error_name(code: int) -> str:
    return ERROR_NAMES.get(code, f"UNKNOWN_ERROR_{code}")


# ---------------------------------------------------------------------------------
# Section 8: limits
# ---------------------------------------------------------------------------------
MAX_STRING = 32767
MAX_TOPICS_PER_REQUEST = 10_000
MAX_PARTITIONS_PER_TOPIC = 100_000
MAX_GROUPS_PER_REQUEST = 100_000
MAX_MEMBERS_PER_GROUP = 100_000
MAX_LABELS_PER_CONSUMER = 32  # RegisterConsumer v1 `labels`
MAX_MEMBER_STRING = 255  # rack, label key and value: longer is INVALID_REQUEST (7.2)
DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # what a consumer should accept (section 8)

# Minimum encoded element sizes (section 8 table)
MIN_TOPIC = 6  # STRING length + ARRAY count (RegisterConsumer's topics: + INT32)
MIN_INT32 = 4
MIN_OFFSET = 14  # partition INT32 + offset INT64 + metadata NULLABLE_STRING length
MIN_START = 12  # partition INT32 + start_offset INT64
MIN_COMMIT_RESP = 6  # partition INT32 + error_code INT16
MIN_FETCH_RESP = 16  # partition + offset + metadata length + error_code
MIN_GROUP_ID = 2  # DescribeGroups request: a STRING length
MIN_DESCRIBED_GROUP = 22  # every fixed-size field and length of a group entry
MIN_DESCRIBED_MEMBER = 23
MIN_TOPIC_NAME = 2  # DescribeGroups member `topics`: a STRING length
MIN_LABEL = 4  # RegisterConsumer v1 label: two STRING lengths


class Malformed(Exception):
    """A frame that breaks section 8: the receiver closes the connection unanswered."""


class ProtocolError(Exception):
    """A well-formed exchange that did not go as the document says (wrong correlation
    id, an unexpected frame, the peer closing, ...)."""


# ---------------------------------------------------------------------------------
# Section 2: field types
# ---------------------------------------------------------------------------------
class Writer:
    """Builds a body; enforces the same caps as the decoder (section 8: anything that
    can be encoded can be decoded)."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def int8(self, v: int) -> "Writer":
        self.buf += struct.pack(">b", v)
        return self

    def int16(self, v: int) -> "Writer":
        self.buf += struct.pack(">h", v)
        return self

    def int32(self, v: int) -> "Writer":
        self.buf += struct.pack(">i", v)
        return self

    def int64(self, v: int) -> "Writer":
        self.buf += struct.pack(">q", v)
        return self

    def boolean(self, v: bool) -> "Writer":
        self.buf += b"\x01" if v else b"\x00"
        return self

    def string(self, s: str) -> "Writer":
        if s is None:
            raise ValueError("null for a non-nullable STRING")
        b = s.encode("utf-8")
        if len(b) > MAX_STRING:
            raise ValueError(f"string of {len(b)} bytes over the {MAX_STRING} cap")
        self.buf += struct.pack(">h", len(b)) + b
        return self

    def nullable_string(self, s: Optional[str]) -> "Writer":
        if s is None:
            self.buf += struct.pack(">h", -1)
            return self
        return self.string(s)

    def array(self, items, cap: int, each: Callable[["Writer", object], None],
              nullable: bool = False) -> "Writer":
        if items is None:
            if not nullable:
                raise ValueError("null for a non-nullable ARRAY")
            return self.int32(-1)
        items = list(items)
        if len(items) > cap:
            raise ValueError(f"array of {len(items)} entries over the {cap} cap")
        self.int32(len(items))
        for it in items:
            each(self, it)
        return self

    def bytes(self) -> bytes:
        return bytes(self.buf)


class Reader:
    """Bounded reader over one frame's bytes."""

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = memoryview(data)
        self.pos = pos
        self.end = len(data)

    def remaining(self) -> int:
        return self.end - self.pos

    def _take(self, n: int, what: str) -> memoryview:
        if n > self.remaining():
            raise Malformed(f"{what}: needs {n} bytes, {self.remaining()} left")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int8(self, what: str = "INT8") -> int:
        return struct.unpack(">b", self._take(1, what))[0]

    def int16(self, what: str = "INT16") -> int:
        return struct.unpack(">h", self._take(2, what))[0]

    def int32(self, what: str = "INT32") -> int:
        return struct.unpack(">i", self._take(4, what))[0]

    def int64(self, what: str = "INT64") -> int:
        return struct.unpack(">q", self._take(8, what))[0]

    def boolean(self, what: str = "BOOLEAN") -> bool:
        return self._take(1, what)[0] != 0

    def _string_body(self, n: int, what: str) -> str:
        if n > MAX_STRING:  # cannot happen for an INT16, kept for clarity
            raise Malformed(f"{what}: length {n} over the cap")
        raw = bytes(self._take(n, what))
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise Malformed(f"{what}: not UTF-8 ({e})") from None

    def string(self, what: str = "STRING") -> str:
        n = self.int16(what)
        if n < 0:
            raise Malformed(f"{what}: length {n} in a non-nullable STRING")
        return self._string_body(n, what)

    def nullable_string(self, what: str = "NULLABLE_STRING") -> Optional[str]:
        n = self.int16(what)
        if n == -1:
            return None
        if n < -1:
            raise Malformed(f"{what}: length {n}")
        return self._string_body(n, what)

    def array(self, what: str, cap: int, min_size: int, each: Callable[["Reader"], object],
              nullable: bool = False):
        n = self.int32(what)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise Malformed(f"{what}: count {n}")
        if n > cap:
            raise Malformed(f"{what}: count {n} over the cap {cap}")
        if n * min_size > self.remaining():
            raise Malformed(f"{what}: count {n} x {min_size} bytes exceeds the "
                            f"{self.remaining()} bytes left")
        return [each(self) for _ in range(n)]

    def finish(self, what: str) -> None:
        if self.remaining():
            raise Malformed(f"{what}: {self.remaining()} bytes left after the last field")


# Shared sub-structures -------------------------------------------------------------
# offsets => topic [partitions]; partitions => partition offset metadata
Offsets = list  # [(topic, [(partition, offset, metadata)])]


def _w_offsets(w: Writer, offsets) -> None:
    def topic(w, t):
        name, parts = t
        w.string(name)
        w.array(parts, MAX_PARTITIONS_PER_TOPIC,
                lambda w, p: w.int32(p[0]).int64(p[1]).nullable_string(p[2]))
    w.array(offsets, MAX_TOPICS_PER_REQUEST, topic)


def _r_offsets(r: Reader, what: str):
    def topic(r):
        name = r.string(f"{what}.topic")
        parts = r.array(f"{what}.partitions", MAX_PARTITIONS_PER_TOPIC, MIN_OFFSET,
                        lambda r: (r.int32(), r.int64(), r.nullable_string()))
        return (name, parts)
    return r.array(what, MAX_TOPICS_PER_REQUEST, MIN_TOPIC, topic)


def _w_topic_ints(w: Writer, topics, nullable: bool = False) -> None:
    def topic(w, t):
        name, parts = t
        w.string(name)
        w.array(parts, MAX_PARTITIONS_PER_TOPIC, lambda w, p: w.int32(p))
    w.array(topics, MAX_TOPICS_PER_REQUEST, topic, nullable=nullable)


def _r_topic_ints(r: Reader, what: str, nullable: bool = False):
    def topic(r):
        name = r.string(f"{what}.topic")
        parts = r.array(f"{what}.partitions", MAX_PARTITIONS_PER_TOPIC, MIN_INT32,
                        lambda r: r.int32())
        return (name, parts)
    return r.array(what, MAX_TOPICS_PER_REQUEST, MIN_TOPIC, topic, nullable=nullable)


def offsets_to_dict(offsets) -> dict[tuple[str, int], int]:
    return {(t, p): off for t, parts in offsets for p, off, _m in parts}


def dict_to_offsets(d: dict[tuple[str, int], int]):
    by_topic: dict[str, list] = {}
    for (t, p), off in sorted(d.items()):
        by_topic.setdefault(t, []).append((p, off, None))
    return list(by_topic.items())


# ---------------------------------------------------------------------------------
# Section 5: messages (version 0; RegisterConsumer also version 1)
# ---------------------------------------------------------------------------------
@dataclass
class RegisterConsumerRequest:
    """Version 1 appends the member data (5.1): `rack`, `weight`, `labels`. With their
    defaults (None, 1, []) the request goes as version 0, which means exactly those
    (3, rule 4: the lowest version that carries the values)."""
    group_id: str
    consumer_id: str
    host: str
    session_timeout_ms: int
    kind: int = KIND_STATIC
    topics: list = field(default_factory=list)  # [(topic, streams)]
    pattern: Optional[str] = None
    pattern_streams: int = 0
    auto_offset_reset: int = RESET_EARLIEST
    assignor: Optional[str] = None
    rack: Optional[str] = None  # v1
    weight: int = 1  # v1
    labels: list = field(default_factory=list)  # v1: [(key, value)]
    API_KEY = REGISTER_CONSUMER

    def version(self) -> int:
        return 0 if (self.rack is None and self.weight == 1 and not self.labels) else 1

    def encode(self, w: Writer, version: Optional[int] = None) -> None:
        version = self.version() if version is None else version
        if version < self.version():
            raise ValueError("member data needs RegisterConsumer v1")
        w.string(self.group_id).string(self.consumer_id).string(self.host)
        w.int32(self.session_timeout_ms).int8(self.kind)
        w.array(self.topics, MAX_TOPICS_PER_REQUEST, lambda w, t: w.string(t[0]).int32(t[1]))
        w.nullable_string(self.pattern).int32(self.pattern_streams)
        w.int8(self.auto_offset_reset).nullable_string(self.assignor)
        if version >= 1:
            w.nullable_string(self.rack).int32(self.weight)
            w.array(self.labels, MAX_LABELS_PER_CONSUMER,
                    lambda w, kv: w.string(kv[0]).string(kv[1]))

    @classmethod
    def decode(cls, r: Reader, version: int = 0) -> "RegisterConsumerRequest":
        m = cls(
            group_id=r.string("group_id"),
            consumer_id=r.string("consumer_id"),
            host=r.string("host"),
            session_timeout_ms=r.int32("session_timeout_ms"),
            kind=r.int8("kind"),
            topics=r.array("topics", MAX_TOPICS_PER_REQUEST, MIN_TOPIC,
                           lambda r: (r.string("topic"), r.int32("streams"))),
            pattern=r.nullable_string("pattern"),
            pattern_streams=r.int32("pattern_streams"),
            auto_offset_reset=r.int8("auto_offset_reset"),
            assignor=r.nullable_string("assignor"),
        )
        if version >= 1:
            m.rack = r.nullable_string("rack")
            m.weight = r.int32("weight")
            m.labels = r.array("labels", MAX_LABELS_PER_CONSUMER, MIN_LABEL,
                               lambda r: (r.string("key"), r.string("value")))
        return m


@dataclass
class RegisterConsumerResponse:
    error_code: int
    error_message: Optional[str] = None
    heartbeat_interval_ms: int = 0
    generation: int = 0
    API_KEY = REGISTER_CONSUMER

    def encode(self, w: Writer) -> None:
        w.int16(self.error_code).nullable_string(self.error_message)
        w.int32(self.heartbeat_interval_ms).int32(self.generation)

    @classmethod
    def decode(cls, r: Reader) -> "RegisterConsumerResponse":
        return cls(r.int16("error_code"), r.nullable_string("error_message"),
                   r.int32("heartbeat_interval_ms"), r.int32("generation"))


@dataclass
class HeartbeatRequest:
    group_id: str
    generation: int
    API_KEY = HEARTBEAT

    def encode(self, w: Writer) -> None:
        w.string(self.group_id).int32(self.generation)

    @classmethod
    def decode(cls, r: Reader) -> "HeartbeatRequest":
        return cls(r.string("group_id"), r.int32("generation"))


@dataclass
class HeartbeatResponse:
    error_code: int
    fetchers_healthy: bool = True
    offsets: list = field(default_factory=list)  # [(topic, [(partition, offset, metadata)])]
    API_KEY = HEARTBEAT

    def encode(self, w: Writer) -> None:
        w.int16(self.error_code).boolean(self.fetchers_healthy)
        _w_offsets(w, self.offsets)

    @classmethod
    def decode(cls, r: Reader) -> "HeartbeatResponse":
        return cls(r.int16("error_code"), r.boolean("fetchers_healthy"), _r_offsets(r, "offsets"))


@dataclass
class StopFetcherRequest:
    group_id: str
    generation: int
    stop_all: bool
    partitions: list = field(default_factory=list)  # [(topic, [partition])]
    API_KEY = STOP_FETCHER

    def encode(self, w: Writer) -> None:
        w.string(self.group_id).int32(self.generation).boolean(self.stop_all)
        _w_topic_ints(w, self.partitions)

    @classmethod
    def decode(cls, r: Reader) -> "StopFetcherRequest":
        return cls(r.string("group_id"), r.int32("generation"), r.boolean("stop_all"),
                   _r_topic_ints(r, "partitions"))


@dataclass
class StopFetcherResponse:
    error_code: int
    offsets: list = field(default_factory=list)
    API_KEY = STOP_FETCHER

    def encode(self, w: Writer) -> None:
        w.int16(self.error_code)
        _w_offsets(w, self.offsets)

    @classmethod
    def decode(cls, r: Reader) -> "StopFetcherResponse":
        return cls(r.int16("error_code"), _r_offsets(r, "offsets"))


@dataclass
class StartFetcherRequest:
    group_id: str
    generation: int
    assignment: list = field(default_factory=list)  # [(topic, [(partition, start_offset)])]
    API_KEY = START_FETCHER

    def encode(self, w: Writer) -> None:
        w.string(self.group_id).int32(self.generation)

        def topic(w, t):
            w.string(t[0])
            w.array(t[1], MAX_PARTITIONS_PER_TOPIC, lambda w, p: w.int32(p[0]).int64(p[1]))
        w.array(self.assignment, MAX_TOPICS_PER_REQUEST, topic)

    @classmethod
    def decode(cls, r: Reader) -> "StartFetcherRequest":
        group_id = r.string("group_id")
        generation = r.int32("generation")

        def topic(r):
            name = r.string("assignment.topic")
            parts = r.array("assignment.partitions", MAX_PARTITIONS_PER_TOPIC, MIN_START,
                            lambda r: (r.int32(), r.int64()))
            return (name, parts)
        return cls(group_id, generation,
                   r.array("assignment", MAX_TOPICS_PER_REQUEST, MIN_TOPIC, topic))


@dataclass
class StartFetcherResponse:
    error_code: int
    API_KEY = START_FETCHER

    def encode(self, w: Writer) -> None:
        w.int16(self.error_code)

    @classmethod
    def decode(cls, r: Reader) -> "StartFetcherResponse":
        return cls(r.int16("error_code"))


@dataclass
class CommitOffsetRequest:
    group_id: str
    consumer_id: str
    generation: int
    topics: list = field(default_factory=list)  # [(topic, [(partition, offset, metadata)])]
    API_KEY = COMMIT_OFFSET

    def encode(self, w: Writer) -> None:
        w.string(self.group_id).string(self.consumer_id).int32(self.generation)
        _w_offsets(w, self.topics)

    @classmethod
    def decode(cls, r: Reader) -> "CommitOffsetRequest":
        return cls(r.string("group_id"), r.string("consumer_id"), r.int32("generation"),
                   _r_offsets(r, "topics"))


@dataclass
class CommitOffsetResponse:
    topics: list = field(default_factory=list)  # [(topic, [(partition, error_code)])]
    API_KEY = COMMIT_OFFSET

    def encode(self, w: Writer) -> None:
        def topic(w, t):
            w.string(t[0])
            w.array(t[1], MAX_PARTITIONS_PER_TOPIC, lambda w, p: w.int32(p[0]).int16(p[1]))
        w.array(self.topics, MAX_TOPICS_PER_REQUEST, topic)

    @classmethod
    def decode(cls, r: Reader) -> "CommitOffsetResponse":
        def topic(r):
            name = r.string("topics.topic")
            parts = r.array("topics.partitions", MAX_PARTITIONS_PER_TOPIC, MIN_COMMIT_RESP,
                            lambda r: (r.int32(), r.int16()))
            return (name, parts)
        return cls(r.array("topics", MAX_TOPICS_PER_REQUEST, MIN_TOPIC, topic))


@dataclass
class FetchOffsetsRequest:
    group_id: str
    topics: Optional[list] = None  # [(topic, [partition])] or None for "all committed"
    API_KEY = FETCH_OFFSETS

    def encode(self, w: Writer) -> None:
        w.string(self.group_id)
        _w_topic_ints(w, self.topics, nullable=True)

    @classmethod
    def decode(cls, r: Reader) -> "FetchOffsetsRequest":
        return cls(r.string("group_id"), _r_topic_ints(r, "topics", nullable=True))


@dataclass
class FetchOffsetsResponse:
    error_code: int
    topics: list = field(default_factory=list)  # [(topic, [(partition, offset, metadata, error_code)])]
    API_KEY = FETCH_OFFSETS

    def encode(self, w: Writer) -> None:
        w.int16(self.error_code)

        def topic(w, t):
            w.string(t[0])
            w.array(t[1], MAX_PARTITIONS_PER_TOPIC,
                    lambda w, p: w.int32(p[0]).int64(p[1]).nullable_string(p[2]).int16(p[3]))
        w.array(self.topics, MAX_TOPICS_PER_REQUEST, topic)

    @classmethod
    def decode(cls, r: Reader) -> "FetchOffsetsResponse":
        err = r.int16("error_code")

        def topic(r):
            name = r.string("topics.topic")
            parts = r.array("topics.partitions", MAX_PARTITIONS_PER_TOPIC, MIN_FETCH_RESP,
                            lambda r: (r.int32(), r.int64(), r.nullable_string(), r.int16()))
            return (name, parts)
        return cls(err, r.array("topics", MAX_TOPICS_PER_REQUEST, MIN_TOPIC, topic))

    def offsets(self) -> dict[tuple[str, int], tuple[int, int]]:
        """(topic, partition) -> (offset, error_code)"""
        return {(t, p): (off, err) for t, parts in self.topics for p, off, _m, err in parts}


@dataclass
class LeaveGroupRequest:
    group_id: str
    consumer_id: str
    API_KEY = LEAVE_GROUP

    def encode(self, w: Writer) -> None:
        w.string(self.group_id).string(self.consumer_id)

    @classmethod
    def decode(cls, r: Reader) -> "LeaveGroupRequest":
        return cls(r.string("group_id"), r.string("consumer_id"))


@dataclass
class LeaveGroupResponse:
    error_code: int
    API_KEY = LEAVE_GROUP

    def encode(self, w: Writer) -> None:
        w.int16(self.error_code)

    @classmethod
    def decode(cls, r: Reader) -> "LeaveGroupResponse":
        return cls(r.int16("error_code"))


@dataclass
class DescribeGroupsRequest:
    groups: Optional[list] = None  # [group_id], or None for every group K has
    API_KEY = DESCRIBE_GROUPS

    def encode(self, w: Writer) -> None:
        w.array(self.groups, MAX_GROUPS_PER_REQUEST, lambda w, g: w.string(g), nullable=True)

    @classmethod
    def decode(cls, r: Reader) -> "DescribeGroupsRequest":
        return cls(r.array("groups", MAX_GROUPS_PER_REQUEST, MIN_GROUP_ID,
                           lambda r: r.string("group_id"), nullable=True))


@dataclass
class DescribedMember:
    consumer_id: str
    host: str
    session_timeout_ms: int
    generation: int
    subscription: str
    topics: list  # [topic]
    auto_offset_reset: int
    partitions: list  # [(topic, [partition])]

    def encode(self, w: Writer) -> None:
        w.string(self.consumer_id).string(self.host).int32(self.session_timeout_ms)
        w.int32(self.generation).string(self.subscription)
        w.array(self.topics, MAX_TOPICS_PER_REQUEST, lambda w, t: w.string(t))
        w.int8(self.auto_offset_reset)
        _w_topic_ints(w, self.partitions)

    @classmethod
    def decode(cls, r: Reader) -> "DescribedMember":
        return cls(r.string("consumer_id"), r.string("host"), r.int32("session_timeout_ms"),
                   r.int32("generation"), r.string("subscription"),
                   r.array("member.topics", MAX_TOPICS_PER_REQUEST, MIN_TOPIC_NAME,
                           lambda r: r.string("topic")),
                   r.int8("auto_offset_reset"), _r_topic_ints(r, "member.partitions"))


@dataclass
class DescribedGroup:
    group_id: str
    error_code: int
    state: str = ""
    generation: int = 0
    assignor: Optional[str] = None
    rebalance_mode: str = ""
    members: list = field(default_factory=list)  # [DescribedMember]
    held_by_failed: list = field(default_factory=list)  # [(topic, [partition])]

    def encode(self, w: Writer) -> None:
        w.string(self.group_id).int16(self.error_code).string(self.state)
        w.int32(self.generation).nullable_string(self.assignor).string(self.rebalance_mode)
        w.array(self.members, MAX_MEMBERS_PER_GROUP, lambda w, m: m.encode(w))
        _w_topic_ints(w, self.held_by_failed)

    @classmethod
    def decode(cls, r: Reader) -> "DescribedGroup":
        return cls(r.string("group_id"), r.int16("error_code"), r.string("state"),
                   r.int32("generation"), r.nullable_string("assignor"),
                   r.string("rebalance_mode"),
                   r.array("members", MAX_MEMBERS_PER_GROUP, MIN_DESCRIBED_MEMBER,
                           DescribedMember.decode),
                   _r_topic_ints(r, "held_by_failed"))


@dataclass
class DescribeGroupsResponse:
    groups: list = field(default_factory=list)  # [DescribedGroup]
    API_KEY = DESCRIBE_GROUPS

    def encode(self, w: Writer) -> None:
        w.array(self.groups, MAX_GROUPS_PER_REQUEST, lambda w, g: g.encode(w))

    @classmethod
    def decode(cls, r: Reader) -> "DescribeGroupsResponse":
        return cls(r.array("groups", MAX_GROUPS_PER_REQUEST, MIN_DESCRIBED_GROUP,
                           DescribedGroup.decode))


def topic_ints_to_set(topics) -> set[tuple[str, int]]:
    return {(t, p) for t, parts in topics for p in parts}


REQUEST_TYPES = {c.API_KEY: c for c in (
    RegisterConsumerRequest, HeartbeatRequest, StopFetcherRequest, StartFetcherRequest,
    CommitOffsetRequest, FetchOffsetsRequest, LeaveGroupRequest, DescribeGroupsRequest)}
RESPONSE_TYPES = {c.API_KEY: c for c in (
    RegisterConsumerResponse, HeartbeatResponse, StopFetcherResponse, StartFetcherResponse,
    CommitOffsetResponse, FetchOffsetsResponse, LeaveGroupResponse, DescribeGroupsResponse)}


# ---------------------------------------------------------------------------------
# Section 1: framing
# ---------------------------------------------------------------------------------
@dataclass
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: Optional[str]


# The versions this module implements, per API key (section 3).
VERSIONS = {REGISTER_CONSUMER: (0, 1)}


def encode_request(corr: int, client_id: Optional[str], msg, version: Optional[int] = None) -> bytes:
    """A whole request frame (size + header v1 + body), in `version` or else the lowest
    version that carries the message's values (section 3, rule 4)."""
    if version is None:
        version = msg.version() if hasattr(msg, "version") else 0
    w = Writer()
    w.int16(msg.API_KEY).int16(version).int32(corr).nullable_string(client_id)
    if hasattr(msg, "version"):
        msg.encode(w, version)
    else:
        msg.encode(w)
    payload = w.bytes()
    return struct.pack(">i", len(payload)) + payload


def encode_response(corr: int, msg) -> bytes:
    """A whole response frame (size + header v0 + body)."""
    w = Writer()
    w.int32(corr)
    msg.encode(w)
    payload = w.bytes()
    return struct.pack(">i", len(payload)) + payload


def decode_request(payload: bytes):
    """payload = a frame without its size -> (RequestHeader, message). Unknown native
    keys and versions this module does not implement are malformed (section 3)."""
    r = Reader(payload)
    h = RequestHeader(r.int16("api_key"), r.int16("api_version"), r.int32("correlation_id"),
                      r.nullable_string("client_id"))
    cls = REQUEST_TYPES.get(h.api_key)
    if cls is None:
        raise Malformed(f"unknown api_key {h.api_key}")
    low, high = VERSIONS.get(h.api_key, (0, 0))
    if not low <= h.api_version <= high:
        raise Malformed(f"{API_NAMES[h.api_key]} version {h.api_version} is not implemented")
    msg = cls.decode(r, h.api_version) if h.api_key == REGISTER_CONSUMER else cls.decode(r)
    r.finish(API_NAMES[h.api_key])
    return h, msg


def decode_response(payload: bytes, api_key: int):
    """payload = a frame without its size -> (correlation_id, message)."""
    r = Reader(payload)
    corr = r.int32("correlation_id")
    msg = RESPONSE_TYPES[api_key].decode(r)
    r.finish(API_NAMES[api_key] + " response")
    return corr, msg


# Kafka FindCoordinator v0 (not a native API: plain Kafka, section 4) ----------------
def encode_find_coordinator_v0(corr: int, client_id: Optional[str], group_id: str) -> bytes:
    w = Writer()
    w.int16(FIND_COORDINATOR).int16(0).int32(corr).nullable_string(client_id)
    w.string(group_id)  # key
    payload = w.bytes()
    return struct.pack(">i", len(payload)) + payload


def decode_find_coordinator_v0(payload: bytes) -> tuple[int, int, int, str, int]:
    """-> (correlation_id, error_code, node_id, host, port)"""
    r = Reader(payload)
    corr = r.int32()
    err = r.int16("error_code")
    node = r.int32("node_id")
    host = r.string("host")
    port = r.int32("port")
    r.finish("FindCoordinator v0 response")
    return corr, err, node, host, port


# ---------------------------------------------------------------------------------
# A blocking connection with a bounded, incremental frame reader
# ---------------------------------------------------------------------------------
class Conn:
    """One TCP connection speaking size-prefixed frames.

    `poll_frame(timeout)` returns one complete frame payload (without the size) or None
    if none completed within `timeout`; partial frames are kept across calls, so a
    caller can wake up periodically (to check a lease) without losing bytes. The size
    is checked against `max_frame` before the body is read."""

    def __init__(self, host: str, port: int, *, connect_timeout: float = 10.0,
                 max_frame: int = DEFAULT_MAX_FRAME, client_id: Optional[str] = "drover-native-py"):
        self.host, self.port = host, port
        self.sock = socket.create_connection((host, port), timeout=connect_timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.max_frame = max_frame
        self.client_id = client_id
        self.buf = bytearray()
        self.need: Optional[int] = None  # body size once the size prefix is read
        self.corr = 0
        self.closed = False

    # -- sending ---------------------------------------------------------------------
    def send(self, data: bytes, timeout: float = 10.0) -> float:
        """Write one whole frame; returns the monotonic time at which writing started."""
        started = time.monotonic()
        self.sock.settimeout(timeout)
        self.sock.sendall(data)
        return started

    # -- receiving -------------------------------------------------------------------
    def poll_frame(self, timeout: float) -> Optional[bytes]:
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            frame = self._take_frame()
            if frame is not None:
                return frame
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            want = 4 - len(self.buf) if self.need is None else self.need - len(self.buf)
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(min(max(want, 1), 1 << 20))
            except socket.timeout:
                return None
            if not chunk:
                raise ProtocolError("connection closed by peer"
                                    + (f" ({len(self.buf)} bytes of a frame read)" if self.buf else ""))
            self.buf += chunk

    def _take_frame(self) -> Optional[bytes]:
        if self.need is None:
            if len(self.buf) < 4:
                return None
            (size,) = struct.unpack(">i", self.buf[:4])
            if size < 0 or size > self.max_frame:
                raise Malformed(f"frame size {size} (limit {self.max_frame})")
            del self.buf[:4]
            self.need = size
        if len(self.buf) < self.need:
            return None
        frame = bytes(self.buf[:self.need])
        del self.buf[:self.need]
        self.need = None
        return frame

    def recv_frame(self, timeout: float) -> bytes:
        f = self.poll_frame(timeout)
        if f is None:
            raise TimeoutError(f"no frame within {timeout:.1f} s")
        return f

    # -- request/response for C's own requests ------------------------------------------
    def request(self, msg, timeout: float = 30.0):
        """Send a native request and return the decoded response (30 s: section 6.2's
        request timeout)."""
        self.corr += 1
        corr = self.corr
        self.send(encode_request(corr, self.client_id, msg), timeout=timeout)
        got, resp = decode_response(self.recv_frame(timeout), msg.API_KEY)
        if got != corr:
            raise ProtocolError(f"{API_NAMES[msg.API_KEY]}: correlation id {got}, expected {corr}")
        return resp

    def find_coordinator(self, group_id: str, timeout: float = 30.0) -> tuple[int, int, str, int]:
        """-> (error_code, node_id, host, port)"""
        self.corr += 1
        corr = self.corr
        self.send(encode_find_coordinator_v0(corr, self.client_id, group_id), timeout=timeout)
        got, err, node, host, port = decode_find_coordinator_v0(self.recv_frame(timeout))
        if got != corr:
            raise ProtocolError(f"FindCoordinator: correlation id {got}, expected {corr}")
        return err, node, host, port

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self.sock.close()
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


def find_coordinator(bootstrap: str, group_id: str, timeout: float = 30.0) -> tuple[str, int]:
    """FindCoordinator v0 on a bootstrap broker -> (host, port). Raises on an error code."""
    host, port = split_hostport(bootstrap)
    with Conn(host, port, connect_timeout=timeout) as c:
        err, _node, chost, cport = c.find_coordinator(group_id, timeout)
    if err != NONE:
        raise CoordinatorError(err, f"FindCoordinator({group_id!r})")
    return chost, cport


class CoordinatorError(Exception):
    def __init__(self, code: int, what: str, message: Optional[str] = None):
        self.code = code
        super().__init__(f"{what}: {error_name(code)} ({code})" + (f": {message}" if message else ""))


def split_hostport(s: str) -> tuple[str, int]:
    host, _, port = s.rpartition(":")
    return host.strip("[]"), int(port)


def fetch_offsets(host: str, port: int, group_id: str, topics=None,
                  timeout: float = 30.0) -> FetchOffsetsResponse:
    with Conn(host, port, connect_timeout=timeout) as c:
        return c.request(FetchOffsetsRequest(group_id, topics), timeout)


def describe_groups(host: str, port: int, groups=None,
                    timeout: float = 30.0) -> DescribeGroupsResponse:
    with Conn(host, port, connect_timeout=timeout) as c:
        return c.request(DescribeGroupsRequest(groups), timeout)


# ---------------------------------------------------------------------------------
# Self-check
# ---------------------------------------------------------------------------------
DOC_REQUEST_HEX = """
00 00 00 50 4e 20 00 00 00 00 00 01 00 03 61 70
70 00 07 62 69 6c 6c 69 6e 67 00 09 62 69 6c 6c
69 6e 67 2d 31 00 08 31 30 2e 30 2e 30 2e 35 00
00 75 30 00 00 00 00 01 00 08 69 6e 76 6f 69 63
65 73 00 00 00 02 ff ff 00 00 00 00 00 00 05 72
61 6e 67 65
"""
DOC_REQUEST_V1_HEX = """
00 00 00 6a 4e 20 00 01 00 00 00 01 00 03 61 70
70 00 07 62 69 6c 6c 69 6e 67 00 09 62 69 6c 6c
69 6e 67 2d 32 00 08 31 30 2e 30 2e 30 2e 36 00
00 75 30 00 00 00 00 01 00 08 69 6e 76 6f 69 63
65 73 00 00 00 02 ff ff 00 00 00 00 00 00 05 72
61 6e 67 65 00 05 65 75 2d 31 62 00 00 00 02 00
00 00 01 00 04 64 69 73 6b 00 03 73 73 64
"""
DOC_RESPONSE_HEX = """
00 00 00 10 00 00 00 01 00 00 ff ff 00 00 27 10
00 00 00 00
"""


def _self_check() -> None:
    req = RegisterConsumerRequest("billing", "billing-1", "10.0.0.5", 30000, KIND_STATIC,
                                  [("invoices", 2)], None, 0, RESET_EARLIEST, "range")
    frame = encode_request(1, "app", req)
    assert frame == bytes.fromhex(DOC_REQUEST_HEX), frame.hex(" ")
    assert len(frame) == 84
    h, back = decode_request(frame[4:])
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (20000, 0, 1, "app")
    assert back == req
    # The worked example's v1 registration (section 9).
    v1 = RegisterConsumerRequest("billing", "billing-2", "10.0.0.6", 30000, KIND_STATIC,
                                 [("invoices", 2)], None, 0, RESET_EARLIEST, "range",
                                 rack="eu-1b", weight=2, labels=[("disk", "ssd")])
    frame = encode_request(1, "app", v1)
    assert frame == bytes.fromhex(DOC_REQUEST_V1_HEX), frame.hex(" ")
    h, back = decode_request(frame[4:])
    assert (h.api_version, back) == (1, v1)
    # Defaults at v1 decode to the same request as v0; v0 cannot carry member data.
    h, back = decode_request(encode_request(1, "app", req, version=1)[4:])
    assert (h.api_version, back) == (1, req)
    try:
        encode_request(1, "app", v1, version=0)
    except ValueError:
        pass
    else:
        raise AssertionError("encoded member data as v0")
    resp = RegisterConsumerResponse(NONE, None, 10000, 0)
    rframe = encode_response(1, resp)
    assert rframe == bytes.fromhex(DOC_RESPONSE_HEX), rframe.hex(" ")
    assert decode_response(rframe[4:], REGISTER_CONSUMER) == (1, resp)

    # Round trips of every message, both directions.
    samples = [
        HeartbeatRequest("g", 3),
        HeartbeatResponse(NONE, True, [("t", [(0, 10, None), (1, 0, "meta")])]),
        HeartbeatResponse(NONE, False, []),
        StopFetcherRequest("g", 3, True, []),
        StopFetcherRequest("g", 3, False, [("t", [0, 5]), ("u", [])]),
        StopFetcherResponse(NONE, [("t", [(0, 7, None)])]),
        StartFetcherRequest("g", 4, [("t", [(0, 7), (1, -1), (2, -2)])]),
        StartFetcherResponse(ILLEGAL_GENERATION),
        CommitOffsetRequest("g", "c", 4, [("t", [(0, 8, "m")])]),
        CommitOffsetResponse([("t", [(0, NONE), (1, REBALANCE_IN_PROGRESS)])]),
        FetchOffsetsRequest("g", None),
        FetchOffsetsRequest("g", [("t", [0, 1])]),
        FetchOffsetsResponse(NONE, [("t", [(0, 8, None, NONE), (1, -1, None, NONE)])]),
        LeaveGroupRequest("g", "c"),
        LeaveGroupResponse(UNKNOWN_MEMBER_ID),
        RegisterConsumerRequest("g", "c", "", 6000, KIND_WHITELIST, [], "orders-.*", 3,
                                RESET_NONE, None),
        RegisterConsumerResponse(INVALID_SESSION_TIMEOUT, "too small", 0, 0),
        DescribeGroupsRequest(None),
        DescribeGroupsRequest(["a", "", "a"]),
        DescribeGroupsResponse([
            DescribedGroup("g", NONE, "stable", 4, "range", "incremental",
                           [DescribedMember("c1", "h", 6000, 4, "static: t(2)", ["t"], 0,
                                            [("t", [0, 1])])],
                           [("t", [2])]),
            DescribedGroup("x", GROUP_ID_NOT_FOUND)]),
    ]
    for m in samples:
        if type(m).__name__.endswith("Request"):
            f = encode_request(9, None, m)
            h, back = decode_request(f[4:])
            assert h.client_id is None and h.correlation_id == 9
        else:
            f = encode_response(9, m)
            _, back = decode_response(f[4:], m.API_KEY)
        assert back == m, (m, back)

    # A coordinator request as K sends it: header v1 with a null client_id.
    f = encode_request(0, None, HeartbeatRequest("billing", 1))
    assert f.hex() == "00000017" "4e21" "0000" "00000000" "ffff" "000762696c6c696e67" "00000001"

    # Malformed inputs.
    def bad(payload: bytes, fn=decode_request):
        try:
            fn(payload)
        except Malformed:
            return
        raise AssertionError(f"accepted malformed {payload.hex()}")

    good = encode_request(0, None, HeartbeatRequest("g", 1))[4:]
    bad(good + b"\x00")  # trailing byte
    bad(good[:-1])  # truncated
    bad(struct.pack(">hhih", 20001, 1, 0, -1) + b"\x00\x01g\x00\x00\x00\x01")  # version 1
    bad(encode_request(1, None, req, version=1)[4:].replace(b"\x00\x01", b"\x00\x02", 1))  # v2
    # A v1 labels count over its cap.
    over = encode_request(1, None, req, version=1)[4:-4] + struct.pack(">i", 33) + b"\x00" * 132
    bad(over)
    bad(struct.pack(">hhih", 20099, 0, 0, -1))  # unknown key
    bad(struct.pack(">hhih", 20001, 0, 0, -2) + b"\x00\x01g\x00\x00\x00\x01")  # client_id -2
    bad(struct.pack(">hhih", 20001, 0, 0, -1) + b"\xff\xffxx\x00\x00\x00\x01")  # null group
    bad(struct.pack(">hhih", 20001, 0, 0, -1) + b"\x00\x01\xff\x00\x00\x00\x01")  # not UTF-8
    # StartFetcher whose count claims more entries than the bytes can hold.
    sf = (struct.pack(">hhih", 20003, 0, 0, -1) + b"\x00\x01g" + struct.pack(">i", 1)
          + struct.pack(">i", 1) + b"\x00\x01t" + struct.pack(">i", 100_000) + b"\x00" * 12)
    bad(sf)
    sf2 = (struct.pack(">hhih", 20003, 0, 0, -1) + b"\x00\x01g" + struct.pack(">i", 1)
           + struct.pack(">i", 10_001))
    bad(sf2)
    bad(struct.pack(">hhih", 20003, 0, 0, -1) + b"\x00\x01g" + struct.pack(">ii", 1, -1))
    # FetchOffsets request topics may be null, StopFetcher partitions may not.
    decode_request(struct.pack(">hhih", 20005, 0, 0, -1) + b"\x00\x01g" + struct.pack(">i", -1))
    bad(struct.pack(">hhih", 20002, 0, 0, -1) + b"\x00\x01g" + struct.pack(">ib", 1, 1)
        + struct.pack(">i", -1))
    # The minimum sizes of section 8 for DescribeGroups are those of the encodings.
    assert len(encode_response(0, DescribeGroupsResponse([DescribedGroup("", 0)]))) \
        == 4 + 4 + 4 + MIN_DESCRIBED_GROUP
    m = DescribedMember("", "", 0, 0, "", [], 0, [])
    w = Writer()
    m.encode(w)
    assert len(w.bytes()) == MIN_DESCRIBED_MEMBER
    # Response decoding is bounded too.
    bad(struct.pack(">ih", 1, 0) + struct.pack(">i", 10_001),
        lambda p: decode_response(p, FETCH_OFFSETS))
    # BOOLEAN: any non-zero is true.
    _, hb = decode_response(struct.pack(">ihbi", 1, 0, 7, 0), HEARTBEAT)
    assert hb.fetchers_healthy is True
    # Encoders enforce the caps.
    try:
        Writer().string("x" * 32768)
    except ValueError:
        pass
    else:
        raise AssertionError("encoded an over-long string")
    print("native_protocol self-check: ok")


if __name__ == "__main__":
    _self_check()
