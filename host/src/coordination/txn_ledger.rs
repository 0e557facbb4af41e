//! Where the coordinator's transactional offsets are recorded durably: the transaction
//! coordinator's side of TxnOffsetCommit (coordinator ABI 3.4).
//!
//! When the coordinator plugin has validated a TxnOffsetCommit it outputs
//! `StageTxnOffsets`; the driver hands the offsets to the broker's [`TxnOffsetLedger`],
//! which records them with the producer's open transaction (so they survive a restart
//! or a slot fail-over until the transaction ends) and answers a Kafka error code. The
//! driver feeds the code back as `TxnOffsetsStaged`, which answers the client. Without
//! a ledger (no transaction coordinator in the broker) the driver answers
//! COORDINATOR_NOT_AVAILABLE itself ([`NO_LEDGER`]).
//!
//! The plugin's output names the producer, not its transactional id; the driver reads
//! the id from the TxnOffsetCommit request itself ([`Staging::transactional_id`]), for
//! a ledger that finds the transaction by its id (cluster mode, where the transaction's
//! coordinator may be another broker: `crate::txn::group_offsets`).

use std::future::Future;
use std::pin::Pin;

use drover_abi::coordinator::PendingTxnOffsets;

/// A boxed future that may be sent to the runtime.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The code the driver answers a staging with when the broker has no ledger:
/// COORDINATOR_NOT_AVAILABLE (15, retriable).
pub const NO_LEDGER: i16 = 15;

/// One validated TxnOffsetCommit's offsets to record.
#[derive(Debug, Clone)]
pub struct Staging {
    /// The request's `transactional_id`, as the driver read it from the request
    /// ([`TxnIds`]); `None` if it could not (a ledger that needs it refuses the
    /// staging with INVALID_TXN_STATE).
    pub transactional_id: Option<String>,
    /// One group's offsets of producer `producer_id` at `producer_epoch`.
    pub pending: PendingTxnOffsets,
}

/// Most (producer id, group) keys [`TxnIds`] remembers; the oldest is forgotten
/// beyond it (a TxnOffsetCommit the coordinator refused leaves its key behind).
pub const MAX_TXN_IDS: usize = 10_000;

/// The transactional id of each (producer id, group) seen in a TxnOffsetCommit
/// request and not yet staged, bounded by [`MAX_TXN_IDS`]. The request's own fields
/// are untrusted: a client naming another producer's id with a wrong transactional id
/// can only make that producer's concurrent staging fail verification (refused, the
/// client aborts and retries), never stage offsets for a transaction it is not in.
#[derive(Debug, Default)]
pub struct TxnIds {
    ids: std::collections::BTreeMap<(i64, String), (u64, String)>,
    next: u64,
}

impl TxnIds {
    /// Notes the transactional id of a TxnOffsetCommit `frame` (header included),
    /// if it decodes.
    pub fn note_request(&mut self, frame: &bytes::Bytes) {
        use kafka_protocol::messages::RequestKind;
        let Ok((_, request)) = drover_kafka_wire::decode_request(frame.clone()) else {
            return;
        };
        if let RequestKind::TxnOffsetCommit(r) = request.body {
            self.note(
                r.producer_id.0,
                r.group_id.0.as_str(),
                r.transactional_id.0.as_str(),
            );
        }
    }

    /// Notes that `producer_id` commits offsets of `group` as `transactional_id`.
    pub fn note(&mut self, producer_id: i64, group: &str, transactional_id: &str) {
        self.next += 1;
        self.ids.insert(
            (producer_id, group.to_owned()),
            (self.next, transactional_id.to_owned()),
        );
        if self.ids.len() > MAX_TXN_IDS {
            if let Some(oldest) = self
                .ids
                .iter()
                .min_by_key(|(_, (n, _))| *n)
                .map(|(k, _)| k.clone())
            {
                self.ids.remove(&oldest);
            }
        }
    }

    /// The transactional id last noted for (`producer_id`, `group`).
    pub fn get(&self, producer_id: i64, group: &str) -> Option<String> {
        self.ids
            .get(&(producer_id, group.to_owned()))
            .map(|(_, id)| id.clone())
    }

    /// Forgets every key of `producer_id` (its transaction ended).
    pub fn forget_producer(&mut self, producer_id: i64) {
        let keys: Vec<_> = self
            .ids
            .range((producer_id, String::new())..)
            .take_while(|((p, _), _)| *p == producer_id)
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            self.ids.remove(&k);
        }
    }
}

/// Records a transaction's pending offsets durably (the transaction coordinator).
pub trait TxnOffsetLedger: Send + Sync + 'static {
    /// Records `staging.pending` (one group's offsets of producer `producer_id` at
    /// `producer_epoch`) with that producer's open transaction. Resolves to a Kafka
    /// error code: 0 once durable; otherwise the code the TxnOffsetCommit is answered
    /// with for every accepted partition (INVALID_PRODUCER_EPOCH or PRODUCER_FENCED for
    /// a fenced producer, INVALID_TXN_STATE when the transaction did not add the
    /// group's offsets, COORDINATOR_NOT_AVAILABLE while it cannot write, ...).
    fn stage(&self, staging: Staging) -> BoxFuture<'static, i16>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_kept_per_producer_and_group_bounded_and_forgotten_per_producer() {
        let mut ids = TxnIds::default();
        ids.note(7, "g", "app-1");
        ids.note(7, "h", "app-1");
        ids.note(8, "g", "app-2");
        assert_eq!(ids.get(7, "g").as_deref(), Some("app-1"));
        assert_eq!(ids.get(8, "g").as_deref(), Some("app-2"));
        // The last request wins.
        ids.note(8, "g", "app-3");
        assert_eq!(ids.get(8, "g").as_deref(), Some("app-3"));
        ids.forget_producer(7);
        assert_eq!(ids.get(7, "g"), None);
        assert_eq!(ids.get(7, "h"), None);
        assert_eq!(ids.get(8, "g").as_deref(), Some("app-3"));
        for p in 0..(MAX_TXN_IDS as i64 + 10) {
            ids.note(1000 + p, "g", "x");
        }
        assert_eq!(ids.ids.len(), MAX_TXN_IDS);
        // The oldest went first.
        assert_eq!(ids.get(8, "g"), None);
        assert!(ids.get(1000 + MAX_TXN_IDS as i64 + 9, "g").is_some());
    }

    #[test]
    fn a_txn_offset_commit_frame_is_read_and_other_frames_are_ignored() {
        use kafka_protocol::{
            messages::{ApiKey, RequestHeader, TxnOffsetCommitRequest},
            protocol::{Encodable, StrBytes},
        };
        let mut frame = bytes::BytesMut::new();
        let version = 3;
        let mut header = RequestHeader::default();
        header.request_api_key = ApiKey::TxnOffsetCommit as i16;
        header.request_api_version = version;
        header.correlation_id = 1;
        header
            .encode(
                &mut frame,
                ApiKey::TxnOffsetCommit.request_header_version(version),
            )
            .unwrap();
        let mut request = TxnOffsetCommitRequest::default();
        request.transactional_id = StrBytes::from_static_str("app-1").into();
        request.group_id = StrBytes::from_static_str("g").into();
        request.producer_id = 42.into();
        request.encode(&mut frame, version).unwrap();
        let mut ids = TxnIds::default();
        ids.note_request(&frame.freeze());
        assert_eq!(ids.get(42, "g").as_deref(), Some("app-1"));
        ids.note_request(&bytes::Bytes::from_static(&[0, 28, 0, 3, 0, 0]));
        assert_eq!(ids.ids.len(), 1);
    }
}
