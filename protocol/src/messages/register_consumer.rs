//! RegisterConsumer (20000, consumer → coordinator), versions 0 and 1.
//!
//! Version 1 appends the consumer's member data ([`MemberData`]: rack, weight, labels)
//! to the request; its response is the same as version 0's. A v0 request means the
//! defaults: no rack, weight 1, no labels.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::error_code::ErrorCode;
use crate::limits::{MAX_LABELS_PER_CONSUMER, MAX_MEMBER_STRING_LEN, MAX_TOPICS_PER_REQUEST};
use crate::primitives::{
    atomic, read_array, read_i16, read_i32, read_i8, read_nullable_string, read_string,
    write_array, write_nullable_string, write_string,
};

/// How a consumer names its topics (`kind INT8`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubscriptionKind(pub i8);

impl SubscriptionKind {
    /// 0: a static list of topics, each with a stream count.
    pub const STATIC: SubscriptionKind = SubscriptionKind(0);
    /// 1: every topic whose whole name matches `pattern`.
    pub const WHITELIST: SubscriptionKind = SubscriptionKind(1);
    /// 2: every topic whose whole name does not match `pattern`.
    pub const BLACKLIST: SubscriptionKind = SubscriptionKind(2);

    /// Whether the kind uses a pattern.
    pub const fn is_wildcard(self) -> bool {
        matches!(self.0, 1 | 2)
    }
}

/// What a consumer does where it has no committed offset (`auto_offset_reset INT8`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AutoOffsetReset(pub i8);

impl AutoOffsetReset {
    /// 0: start at the log start offset.
    pub const EARLIEST: AutoOffsetReset = AutoOffsetReset(0);
    /// 1: start at the log end offset.
    pub const LATEST: AutoOffsetReset = AutoOffsetReset(1);
    /// 2: fail: the partition's fetcher reports an error to the application.
    pub const NONE: AutoOffsetReset = AutoOffsetReset(2);

    /// Whether the value is one of the three defined ones.
    pub const fn is_known(self) -> bool {
        matches!(self.0, 0..=2)
    }
}

/// A topic of a static subscription: `topic STRING, streams INT32`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopicStreams {
    /// Topic name.
    pub topic: String,
    /// Number of streams the consumer spreads this topic's partitions over (≥ 1).
    pub streams: i32,
}

/// A subscription, as on the wire: `kind INT8, topics ARRAY{TopicStreams},
/// pattern NULLABLE_STRING, pattern_streams INT32`. Which fields are used depends on
/// `kind`; [`Subscription::validate`] checks the combination.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Subscription {
    /// Static, whitelist or blacklist.
    pub kind: SubscriptionKind,
    /// Static: the topics with their stream counts. Wildcards: empty.
    pub topics: Vec<TopicStreams>,
    /// Wildcards: a regular expression in the Rust `regex` crate's syntax, matched
    /// against whole topic names. Static: null.
    pub pattern: Option<String>,
    /// Wildcards: streams per matched topic (≥ 1). Static: 0.
    pub pattern_streams: i32,
}

impl Subscription {
    /// A static subscription of `(topic, streams)` pairs.
    pub fn static_topics<T: Into<String>>(topics: impl IntoIterator<Item = (T, i32)>) -> Self {
        Subscription {
            kind: SubscriptionKind::STATIC,
            topics: topics
                .into_iter()
                .map(|(topic, streams)| TopicStreams {
                    topic: topic.into(),
                    streams,
                })
                .collect(),
            pattern: None,
            pattern_streams: 0,
        }
    }

    /// Every topic whose whole name matches `pattern`, `streams` streams each.
    pub fn whitelist(pattern: impl Into<String>, streams: i32) -> Self {
        Self::wildcard(SubscriptionKind::WHITELIST, pattern.into(), streams)
    }

    /// Every topic whose whole name does not match `pattern`, `streams` streams each.
    pub fn blacklist(pattern: impl Into<String>, streams: i32) -> Self {
        Self::wildcard(SubscriptionKind::BLACKLIST, pattern.into(), streams)
    }

    fn wildcard(kind: SubscriptionKind, pattern: String, streams: i32) -> Self {
        Subscription {
            kind,
            topics: Vec::new(),
            pattern: Some(pattern),
            pattern_streams: streams,
        }
    }

    /// Checks the structural rules of docs/protocol.md ("RegisterConsumer"): a known
    /// kind; static: at least one topic, names non-empty and distinct, streams ≥ 1, no
    /// pattern, pattern_streams 0; wildcard: no topics, a non-empty pattern,
    /// pattern_streams ≥ 1. Whether the pattern compiles is the coordinator's check.
    /// The error text is suitable as the response's `error_message`.
    pub fn validate(&self) -> Result<(), String> {
        match self.kind {
            SubscriptionKind::STATIC => {
                if self.topics.is_empty() {
                    return Err("static subscription without topics".into());
                }
                if self.pattern.is_some() || self.pattern_streams != 0 {
                    return Err(
                        "static subscription with a pattern or non-zero pattern_streams".into(),
                    );
                }
                let mut seen = std::collections::HashSet::with_capacity(self.topics.len());
                for t in &self.topics {
                    if t.topic.is_empty() {
                        return Err("empty topic name".into());
                    }
                    if t.streams < 1 {
                        return Err(format!("topic {:?}: streams {} < 1", t.topic, t.streams));
                    }
                    if !seen.insert(t.topic.as_str()) {
                        return Err(format!("topic {:?} listed twice", t.topic));
                    }
                }
                Ok(())
            }
            kind if kind.is_wildcard() => {
                if !self.topics.is_empty() {
                    return Err("wildcard subscription with a topic list".into());
                }
                match &self.pattern {
                    None => return Err("wildcard subscription without a pattern".into()),
                    Some(p) if p.is_empty() => return Err("empty pattern".into()),
                    Some(_) => {}
                }
                if self.pattern_streams < 1 {
                    return Err(format!("pattern_streams {} < 1", self.pattern_streams));
                }
                Ok(())
            }
            SubscriptionKind(other) => Err(format!("unknown subscription kind {other}")),
        }
    }

    fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        buf.put_i8(self.kind.0);
        write_array(
            buf,
            &self.topics,
            "Subscription.topics",
            MAX_TOPICS_PER_REQUEST,
            |buf, t| {
                write_string(buf, &t.topic, "TopicStreams.topic")?;
                buf.put_i32(t.streams);
                Ok(())
            },
        )?;
        write_nullable_string(buf, self.pattern.as_deref(), "Subscription.pattern")?;
        buf.put_i32(self.pattern_streams);
        Ok(())
    }

    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(Subscription {
            kind: SubscriptionKind(read_i8(buf, "Subscription.kind")?),
            topics: read_array(
                buf,
                "Subscription.topics",
                MAX_TOPICS_PER_REQUEST,
                2 + 4,
                |buf| {
                    Ok(TopicStreams {
                        topic: read_string(buf, "TopicStreams.topic")?,
                        streams: read_i32(buf, "TopicStreams.streams")?,
                    })
                },
            )?,
            pattern: read_nullable_string(buf, "Subscription.pattern")?,
            pattern_streams: read_i32(buf, "Subscription.pattern_streams")?,
        })
    }
}

/// A free-form label of a consumer (`key STRING, value STRING`, RegisterConsumer v1),
/// for assignors that group or pin consumers by something the protocol does not name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Label {
    /// Not empty, at most [`MAX_MEMBER_STRING_LEN`] bytes, unique among the consumer's
    /// labels.
    pub key: String,
    /// At most [`MAX_MEMBER_STRING_LEN`] bytes; may be empty.
    pub value: String,
}

/// What a consumer declares about itself for the group's assignor (RegisterConsumer
/// v1: `rack NULLABLE_STRING, weight INT32, labels ARRAY{Label}`). The default — no
/// rack, weight 1, no labels — is what a v0 request means, and a request with the
/// default is encoded as v0.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MemberData {
    /// The consumer's rack, as Kafka's `client.rack` (KIP-392, KIP-881): assignors may
    /// prefer partitions whose leader is in the same rack. `None` for none; when set,
    /// not empty and at most [`MAX_MEMBER_STRING_LEN`] bytes.
    pub rack: Option<String>,
    /// The consumer's capacity relative to the group's other members (≥ 1; 1 by
    /// default): a weight-aware assignor gives a consumer of weight 2 about twice the
    /// work of one of weight 1. A unitless ratio.
    pub weight: i32,
    /// At most [`MAX_LABELS_PER_CONSUMER`] labels, in the consumer's order.
    pub labels: Vec<Label>,
}

impl Default for MemberData {
    fn default() -> Self {
        MemberData {
            rack: None,
            weight: 1,
            labels: Vec::new(),
        }
    }
}

impl MemberData {
    /// Whether this is the default, which RegisterConsumer v0 means and carries.
    pub fn is_default(&self) -> bool {
        self.rack.is_none() && self.weight == 1 && self.labels.is_empty()
    }

    /// Checks the value rules of docs/protocol.md §5.1 (v1 fields): a rack, when set,
    /// is not empty; `weight` ≥ 1; label keys not empty and distinct; rack, keys and
    /// values at most [`MAX_MEMBER_STRING_LEN`] bytes. The error text is suitable as
    /// the response's `error_message` (the code is INVALID_REQUEST).
    pub fn validate(&self) -> Result<(), String> {
        let too_long = |what: &str, s: &str| {
            (s.len() > MAX_MEMBER_STRING_LEN).then(|| {
                format!(
                    "{what} of {} bytes exceeds {MAX_MEMBER_STRING_LEN}",
                    s.len()
                )
            })
        };
        if let Some(rack) = &self.rack {
            if rack.is_empty() {
                return Err("empty rack (null means none)".into());
            }
            if let Some(e) = too_long("rack", rack) {
                return Err(e);
            }
        }
        if self.weight < 1 {
            return Err(format!("weight {} < 1", self.weight));
        }
        let mut seen = std::collections::HashSet::with_capacity(self.labels.len());
        for label in &self.labels {
            if label.key.is_empty() {
                return Err("empty label key".into());
            }
            if let Some(e) = too_long("label key", &label.key) {
                return Err(e);
            }
            if let Some(e) = too_long("label value", &label.value) {
                return Err(format!("label {:?}: {e}", label.key));
            }
            if !seen.insert(label.key.as_str()) {
                return Err(format!("label {:?} given twice", label.key));
            }
        }
        Ok(())
    }

    pub(crate) fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        write_nullable_string(buf, self.rack.as_deref(), "MemberData.rack")?;
        buf.put_i32(self.weight);
        write_array(
            buf,
            &self.labels,
            "MemberData.labels",
            MAX_LABELS_PER_CONSUMER,
            |buf, l| {
                write_string(buf, &l.key, "Label.key")?;
                write_string(buf, &l.value, "Label.value")
            },
        )
    }

    pub(crate) fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(MemberData {
            rack: read_nullable_string(buf, "MemberData.rack")?,
            weight: read_i32(buf, "MemberData.weight")?,
            labels: read_array(
                buf,
                "MemberData.labels",
                MAX_LABELS_PER_CONSUMER,
                2 + 2,
                |buf| {
                    Ok(Label {
                        key: read_string(buf, "Label.key")?,
                        value: read_string(buf, "Label.value")?,
                    })
                },
            )?,
        })
    }
}

/// RegisterConsumer request, v0 and v1.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RegisterConsumerRequest {
    /// The group to join.
    pub group_id: String,
    /// Chosen by the consumer, unique in the group.
    pub consumer_id: String,
    /// The consumer's host, for operators.
    pub host: String,
    /// How long the coordinator may go without hearing from the consumer, and the
    /// consumer without hearing from the coordinator, before either considers the
    /// other gone (ms).
    pub session_timeout_ms: i32,
    /// What the consumer consumes.
    pub subscription: Subscription,
    /// What the consumer does where nothing is committed.
    pub auto_offset_reset: AutoOffsetReset,
    /// Name of the assignor plugin; `None` for the group's default.
    pub assignor: Option<String>,
    /// What the consumer declares about itself for the assignor (v1); the default
    /// when the request came as v0.
    pub member: MemberData,
}

impl RegisterConsumerRequest {
    /// The lowest version that carries the request's values: 1 when `member` is not
    /// the default, else 0. [`encode`](Self::encode) and the frame encoder use it.
    pub fn version(&self) -> i16 {
        if self.member.is_default() {
            0
        } else {
            1
        }
    }

    /// Appends the body at [`version`](Self::version) to `buf`; on error `buf` is left
    /// unchanged.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        self.encode_version(buf, self.version())
    }

    /// Appends the body at `version` (0 or 1) to `buf`; on error `buf` is left
    /// unchanged. Fails with [`EncodeError::VersionTooLow`] for v0 when `member` is not
    /// the default, and [`EncodeError::UnsupportedVersion`] for another version.
    pub fn encode_version(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        match version {
            0 if !self.member.is_default() => {
                return Err(EncodeError::VersionTooLow {
                    what: "RegisterConsumerRequest.member",
                    needed: 1,
                    version,
                })
            }
            0 | 1 => {}
            _ => {
                return Err(EncodeError::UnsupportedVersion {
                    api_key: crate::ApiKey::RegisterConsumer.code(),
                    version,
                })
            }
        }
        atomic(buf, |buf| {
            write_string(buf, &self.group_id, "RegisterConsumerRequest.group_id")?;
            write_string(
                buf,
                &self.consumer_id,
                "RegisterConsumerRequest.consumer_id",
            )?;
            write_string(buf, &self.host, "RegisterConsumerRequest.host")?;
            buf.put_i32(self.session_timeout_ms);
            self.subscription.encode(buf)?;
            buf.put_i8(self.auto_offset_reset.0);
            write_nullable_string(
                buf,
                self.assignor.as_deref(),
                "RegisterConsumerRequest.assignor",
            )?;
            if version >= 1 {
                self.member.encode(buf)?;
            }
            Ok(())
        })
    }

    /// Reads a body of `version` (0 or 1; the caller checked it) from the front of
    /// `buf`. A v0 body gives the default [`MemberData`].
    pub fn decode(buf: &mut Bytes, version: i16) -> Result<Self, DecodeError> {
        Ok(RegisterConsumerRequest {
            group_id: read_string(buf, "RegisterConsumerRequest.group_id")?,
            consumer_id: read_string(buf, "RegisterConsumerRequest.consumer_id")?,
            host: read_string(buf, "RegisterConsumerRequest.host")?,
            session_timeout_ms: read_i32(buf, "RegisterConsumerRequest.session_timeout_ms")?,
            subscription: Subscription::decode(buf)?,
            auto_offset_reset: AutoOffsetReset(read_i8(
                buf,
                "RegisterConsumerRequest.auto_offset_reset",
            )?),
            assignor: read_nullable_string(buf, "RegisterConsumerRequest.assignor")?,
            member: if version >= 1 {
                MemberData::decode(buf)?
            } else {
                MemberData::default()
            },
        })
    }

    /// The structural checks every coordinator applies before anything else, with the
    /// error code and message it answers when one fails: an empty group id gives
    /// INVALID_GROUP_ID; an empty consumer id, an invalid subscription
    /// ([`Subscription::validate`]), an unknown `auto_offset_reset` or an empty
    /// assignor name or member data that breaks [`MemberData::validate`] give
    /// INVALID_REQUEST. Session-timeout bounds, the pattern's
    /// syntax, the assignor's existence and the group's size depend on the
    /// coordinator's configuration and are checked by it.
    pub fn validate(&self) -> Result<(), (ErrorCode, String)> {
        if self.group_id.is_empty() {
            return Err((ErrorCode::INVALID_GROUP_ID, "empty group id".into()));
        }
        let invalid = |msg: String| Err((ErrorCode::INVALID_REQUEST, msg));
        if self.consumer_id.is_empty() {
            return invalid("empty consumer id".into());
        }
        if let Err(msg) = self.subscription.validate() {
            return invalid(msg);
        }
        if !self.auto_offset_reset.is_known() {
            return invalid(format!(
                "unknown auto_offset_reset {}",
                self.auto_offset_reset.0
            ));
        }
        if self.assignor.as_deref() == Some("") {
            return invalid("empty assignor name".into());
        }
        if let Err(msg) = self.member.validate() {
            return invalid(msg);
        }
        Ok(())
    }
}

/// RegisterConsumer response, v0 and v1 (the same fields).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RegisterConsumerResponse {
    /// NONE when registered; the connection is then the coordinator channel.
    pub error_code: ErrorCode,
    /// Human-readable detail of an error; null on success.
    pub error_message: Option<String>,
    /// How often the coordinator will send Heartbeat (session_timeout_ms / 3).
    pub heartbeat_interval_ms: i32,
    /// The group's current generation (0 before its first rebalance). The consumer
    /// owns no partitions until its first StartFetcher.
    pub generation: i32,
}

impl RegisterConsumerResponse {
    /// Appends the body (v0 and v1 alike) to `buf`; on error `buf` is left unchanged.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        atomic(buf, |buf| {
            buf.put_i16(self.error_code.0);
            write_nullable_string(
                buf,
                self.error_message.as_deref(),
                "RegisterConsumerResponse.error_message",
            )?;
            buf.put_i32(self.heartbeat_interval_ms);
            buf.put_i32(self.generation);
            Ok(())
        })
    }

    /// Reads a body (v0 and v1 alike) from the front of `buf`.
    pub fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(RegisterConsumerResponse {
            error_code: ErrorCode(read_i16(buf, "RegisterConsumerResponse.error_code")?),
            error_message: read_nullable_string(buf, "RegisterConsumerResponse.error_message")?,
            heartbeat_interval_ms: read_i32(buf, "RegisterConsumerResponse.heartbeat_interval_ms")?,
            generation: read_i32(buf, "RegisterConsumerResponse.generation")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(subscription: Subscription) -> RegisterConsumerRequest {
        RegisterConsumerRequest {
            group_id: "g".into(),
            consumer_id: "c".into(),
            host: "h".into(),
            session_timeout_ms: 30_000,
            subscription,
            auto_offset_reset: AutoOffsetReset::LATEST,
            assignor: None,
            member: MemberData::default(),
        }
    }

    #[test]
    fn validation() {
        assert_eq!(
            request(Subscription::static_topics([("a", 1)])).validate(),
            Ok(())
        );
        assert_eq!(
            request(Subscription::whitelist("a.*", 2)).validate(),
            Ok(())
        );
        assert_eq!(request(Subscription::blacklist("b", 1)).validate(), Ok(()));
        let invalid = |r: RegisterConsumerRequest| r.validate().unwrap_err().0;
        let no_topics: [(&str, i32); 0] = [];
        for sub in [
            Subscription::static_topics(no_topics),
            Subscription::static_topics([("a", 0)]),
            Subscription::static_topics([("", 1)]),
            Subscription::static_topics([("a", 1), ("a", 2)]),
            Subscription::whitelist("", 1),
            Subscription::whitelist("x", 0),
            Subscription {
                kind: SubscriptionKind(3),
                ..Subscription::whitelist("x", 1)
            },
            Subscription {
                pattern: None,
                ..Subscription::blacklist("x", 1)
            },
        ] {
            assert_eq!(invalid(request(sub)), ErrorCode::INVALID_REQUEST);
        }
        let mut r = request(Subscription::whitelist("x", 1));
        r.group_id.clear();
        assert_eq!(invalid(r), ErrorCode::INVALID_GROUP_ID);
        let mut r = request(Subscription::whitelist("x", 1));
        r.auto_offset_reset = AutoOffsetReset(3);
        assert_eq!(invalid(r), ErrorCode::INVALID_REQUEST);
    }

    #[test]
    fn member_data_rules() {
        let label = |k: &str, v: &str| Label {
            key: k.into(),
            value: v.into(),
        };
        let with = |member: MemberData| {
            let mut r = request(Subscription::static_topics([("a", 1)]));
            r.member = member;
            r.validate()
        };
        let long = "x".repeat(MAX_MEMBER_STRING_LEN + 1);
        let ok = MemberData {
            rack: Some("eu-1a".into()),
            weight: 4,
            labels: vec![label("tier", "gold"), label("zone", "")],
        };
        assert_eq!(with(ok.clone()), Ok(()));
        let edge = "x".repeat(MAX_MEMBER_STRING_LEN);
        assert_eq!(
            with(MemberData {
                rack: Some(edge.clone()),
                labels: vec![label(&edge, &edge)],
                ..ok.clone()
            }),
            Ok(())
        );
        for bad in [
            MemberData {
                rack: Some(String::new()),
                ..ok.clone()
            },
            MemberData {
                rack: Some(long.clone()),
                ..ok.clone()
            },
            MemberData {
                weight: 0,
                ..ok.clone()
            },
            MemberData {
                weight: -3,
                ..ok.clone()
            },
            MemberData {
                labels: vec![label("", "v")],
                ..ok.clone()
            },
            MemberData {
                labels: vec![label(&long, "v")],
                ..ok.clone()
            },
            MemberData {
                labels: vec![label("k", &long)],
                ..ok.clone()
            },
            MemberData {
                labels: vec![label("k", "1"), label("k", "2")],
                ..ok.clone()
            },
        ] {
            assert_eq!(
                with(bad.clone()).map_err(|e| e.0),
                Err(ErrorCode::INVALID_REQUEST),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_version_follows_the_member_data() {
        let mut r = request(Subscription::static_topics([("a", 1)]));
        assert_eq!(r.version(), 0);
        let mut v0 = BytesMut::new();
        r.encode(&mut v0).unwrap();
        let mut v1 = BytesMut::new();
        r.encode_version(&mut v1, 1).unwrap();
        // v1 appends: rack null (2), weight 1 (4), labels count 0 (4).
        assert_eq!(&v1[..v0.len()], &v0[..]);
        assert_eq!(&v1[v0.len()..], &[0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 0][..]);
        // Both decode to the same request.
        assert_eq!(
            RegisterConsumerRequest::decode(&mut v0.freeze(), 0),
            Ok(r.clone())
        );
        assert_eq!(
            RegisterConsumerRequest::decode(&mut v1.freeze(), 1),
            Ok(r.clone())
        );

        r.member.weight = 2;
        assert_eq!(r.version(), 1);
        let mut buf = BytesMut::new();
        assert!(matches!(
            r.encode_version(&mut buf, 0),
            Err(EncodeError::VersionTooLow { needed: 1, .. })
        ));
        assert!(matches!(
            r.encode_version(&mut buf, 2),
            Err(EncodeError::UnsupportedVersion { version: 2, .. })
        ));
        assert!(buf.is_empty());
    }
}
