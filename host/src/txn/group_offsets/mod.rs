//! Cluster mode: transactional offset commits when the group's coordinator and the
//! transaction's coordinator are different brokers (KIP-98's AddOffsetsToTxn and
//! TxnOffsetCommit, KIP-447's fencing, across brokers). A group belongs to slot
//! `fnv1a32(group) mod zookeeper.slots` and a transactional id to the slot of its id;
//! their owners are often two brokers. ZooKeeper carries what passes between them:
//!
//! ```text
//! /txn_offsets/<group slot>/<escaped group>+<producer id>
//!     one group's offsets staged by one producer's open transaction (codec::StagedNode)
//! /txn_outcomes/<group slot>/<escaped group>+<producer id>+<epoch>+<c|a>+<coordinator epoch>
//!     a transaction's outcome for one group (codec::OutcomeNode)
//! ```
//!
//! - **Staging** ([`stage::ZkTxnLedger`], at the group's coordinator): once the
//!   coordinator plugin has checked a TxnOffsetCommit's generation and member
//!   (KIP-447), the offsets are merged into the (group, producer id) staged node by a
//!   ZooKeeper multi that also checks (a) the group slot's coordinator epoch
//!   (`/transactions/<slot>`'s version, [`super::zk_store`]), so a broker that lost
//!   the slot cannot stage, and (b) the version of the transaction's record as read
//!   just before, which must show that producer's open transaction with the group
//!   added (KIP-890 part 1's verification). The transaction's coordinator moves the
//!   record to Prepare* before it queues an outcome, so an offset staged after the
//!   transaction ended fails (b) and is refused with INVALID_TXN_STATE.
//! - **Outcomes** ([`outcome::ClusterGroupOffsets`], at the transaction's
//!   coordinator): when a transaction with groups ends, one outcome node per group is
//!   created and the coordinator waits until each is gone (applied), retrying as for
//!   markers, before it records the transaction complete; so the next transaction of
//!   the producer cannot stage offsets for a group before the last one's are applied.
//! - **Applying** ([`outcome::run`], at the group's coordinator): the owner of a slot
//!   follows its outcome directory: it hands the staged node's offsets to the
//!   coordinator plugin again (harmless if it holds them; needed after a fail-over),
//!   completes the producer's transaction in the plugin (committed offsets reach the
//!   offset store before this returns), then deletes the staged node and the outcome.
//!   An outcome queued by a coordinator whose slot has moved on is deleted unapplied:
//!   the new coordinator queues it again.
//! - **Fail-over of the group's slot**: a broker gaining a slot first fences the
//!   previous owner (the transaction store's takeover bumps the slot's epoch), then
//!   reads the slot's staged nodes and hands them to its coordinator plugin as pending
//!   in the same driver message that gives the plugin the slot (`cluster::sync`, which
//!   waits up to 2 s for the takeover; a slot taken over later is handed over by
//!   [`outcome::run`], and until then the plugin does not coordinate it), so OffsetFetch
//!   with `require_stable` answers UNSTABLE_OFFSET_COMMIT for them as before, and never
//!   stable in between. Read before the fence, a node could still be applied and
//!   deleted by the previous owner, and the offsets restored from it would stay
//!   pending with no outcome to resolve them ([`slot_states`]).
//!
//! A committed transaction's offsets are applied at least once: a crash after the
//! offset store took them and before the staged node is deleted applies them again
//! when the slot's next owner follows the outcome (the same offsets, so only a plain
//! OffsetCommit of the same partition in that instant would be overwritten — what
//! Kafka's replay of `__consumer_offsets` does not do; see docs/design.md).
//!
//! Bounds: a staged node holds at most `transactions.max_offsets_per_transaction`
//! offsets and [`MAX_NODE_BYTES`] bytes (POLICY_VIOLATION above); a takeover reads at
//! most [`MAX_NODES_PER_SLOT`] staged nodes; a pass applies at most
//! [`outcome::MAX_BATCH`] outcomes per slot.

pub mod codec;
pub mod outcome;
pub mod slot_states;
pub mod stage;

use super::{types::ProducerIdEpoch, zk_store::escape};

/// The root of the staged nodes below the chroot.
pub const STAGED_ROOT: &str = "/txn_offsets";
/// The root of the outcome nodes below the chroot.
pub const OUTCOME_ROOT: &str = "/txn_outcomes";
/// Largest staged node written, bytes (ZooKeeper's `jute.maxbuffer` is 1 MiB by
/// default; the path and the multi's checks need the rest).
pub const MAX_NODE_BYTES: usize = 1_000_000;
/// Most staged nodes of one slot read when the slot is gained (one children list must
/// fit a ZooKeeper response).
pub const MAX_NODES_PER_SLOT: usize = 100_000;

/// The directory of `slot`'s staged nodes.
pub fn staged_dir(slot: u32) -> String {
    format!("{STAGED_ROOT}/{slot}")
}

/// The staged node of (`group`, `producer_id`) in `slot` (the group's slot).
pub fn staged_path(slot: u32, group: &str, producer_id: i64) -> String {
    format!("{STAGED_ROOT}/{slot}/{}+{producer_id}", escape(group))
}

/// The directory of `slot`'s outcome nodes.
pub fn outcome_dir(slot: u32) -> String {
    format!("{OUTCOME_ROOT}/{slot}")
}

/// The outcome node of a transaction of `producer` ending (`committed` or not) for
/// `group`, in `slot` (the group's slot), queued by a coordinator at
/// `coordinator_epoch`. Derived from the content, so a retry finds it there; the
/// coordinator epoch is part of it, so a new coordinator of the transaction queues its
/// own node rather than finding (and waiting on) one that the group's coordinator
/// drops unapplied as stale.
pub fn outcome_path(
    slot: u32,
    group: &str,
    producer: ProducerIdEpoch,
    committed: bool,
    coordinator_epoch: i32,
) -> String {
    format!(
        "{OUTCOME_ROOT}/{slot}/{}+{}+{}+{}+{coordinator_epoch}",
        escape(group),
        producer.id,
        producer.epoch,
        if committed { 'c' } else { 'a' }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_escape_the_group_and_follow_the_content() {
        assert_eq!(staged_path(3, "a/b", 7), "/txn_offsets/3/a%2Fb+7");
        let p = ProducerIdEpoch { id: 7, epoch: 2 };
        assert_eq!(
            outcome_path(3, "g", p, true, 4),
            "/txn_outcomes/3/g+7+2+c+4"
        );
        assert_ne!(
            outcome_path(3, "g", p, true, 4),
            outcome_path(3, "g", p, false, 4)
        );
        // A new coordinator of the transaction queues its own node.
        assert_ne!(
            outcome_path(3, "g", p, true, 4),
            outcome_path(3, "g", p, true, 5)
        );
    }
}
