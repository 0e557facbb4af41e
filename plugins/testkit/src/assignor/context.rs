//! The context path (assignor ABI 3.1): `assign_with_context` with a generated
//! [`AssignContext`] meets the contract and is deterministic, and with an empty context
//! gives what `assign` gives.

use drover_abi::{
    assignor::{
        AssignContext, AssignContextRef, AssignorArc, BrokerContext, MemberContext, MemberLabel,
        PartitionContext, TopicContext,
    },
    std_types::{RSlice, RSome, RString, RVec},
    AssignInput, Assignment,
};

/// A context for `input` (owned, lent per call): every member labelled `zone=z<i % 3>`,
/// every even partition led by broker `p % 3` (racks `r0`..`r2`) with log start 0, log
/// end `10 p + 5`, committed `10 p` and produce rates; odd partitions absent.
pub struct GeneratedContext {
    members: Vec<MemberContext>,
    brokers: Vec<BrokerContext>,
    topics: Vec<TopicContext>,
}

impl GeneratedContext {
    /// The context for `input` described on the type.
    pub fn for_input(input: &AssignInput) -> Self {
        let members = input
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| MemberContext {
                member_id: m.member_id.clone(),
                labels: RVec::from(vec![MemberLabel {
                    key: "zone".into(),
                    value: RString::from(format!("z{}", i % 3)),
                }]),
            })
            .collect();
        let brokers = (0..3)
            .map(|b| BrokerContext {
                broker_id: b,
                rack: RSome(RString::from(format!("r{b}"))),
            })
            .collect();
        let topics = input
            .topics
            .iter()
            .map(|t| TopicContext {
                topic: t.name.clone(),
                partitions: (0..t.partitions.min(i32::MAX as u32) as i32)
                    .step_by(2)
                    .map(|p| PartitionContext {
                        partition: p,
                        leader: RSome(p % 3),
                        log_start_offset: RSome(0),
                        log_end_offset: RSome(10 * i64::from(p) + 5),
                        committed_offset: RSome(10 * i64::from(p)),
                        produce_bytes_per_sec: RSome(f64::from(p) * 100.0),
                        produce_records_per_sec: RSome(f64::from(p)),
                    })
                    .collect(),
            })
            .collect();
        GeneratedContext {
            members,
            brokers,
            topics,
        }
    }

    /// Lends the context to `f` for one call.
    pub fn lend<R>(&self, f: impl FnOnce(AssignContextRef<'_>) -> R) -> R {
        AssignContext {
            members: RSlice::from_slice(&self.members),
            brokers: RSlice::from_slice(&self.brokers),
            topics: RSlice::from_slice(&self.topics),
            partition_data_age_ms: drover_abi::std_types::ROption::RNone,
        }
        .lend(f)
    }
}

/// `assign_with_context` with the generated context.
pub(super) fn with_context(
    assignor: &AssignorArc,
    input: &AssignInput,
) -> Result<Assignment, String> {
    GeneratedContext::for_input(input)
        .lend(|ctx| assignor.assign_with_context(input, ctx).into_result())
        .map_err(|e| format!("assign_with_context refused a valid input: {e}"))
}

/// `assign_with_context` with an empty context.
pub(super) fn with_empty_context(
    assignor: &AssignorArc,
    input: &AssignInput,
) -> Result<Assignment, String> {
    drover_abi::assignor::context::empty_context(|ctx| {
        assignor.assign_with_context(input, ctx).into_result()
    })
    .map_err(|e| format!("assign_with_context (empty context) refused a valid input: {e}"))
}
