//! Native groups (docs/protocol.md §6), by job: the group with its rebalance engine
//! (`group`: members, zombies, phases, the safety check), its pending commit batch and
//! non-regression rules (`offsets`), and the native requests by API family —
//! RegisterConsumer (`register`), CommitOffset and FetchOffsets (`offset_requests`, with
//! the FetchOffsets answer in `fetch_response`), LeaveGroup and DescribeGroups
//! (`leave_describe`) — and the consumers' answers on their channels (`channel`).
//!
//! The group is pure, as the other engines are: its methods read a [`NativeEnv`]
//! (`effects`: what a group reads) and record their decisions in the one result shape
//! of every group type (`core/result.rs`), and never see the coordinator's shared
//! state. One adapter (`apply`, `Ctx::native`) builds the environment for a call and
//! hands the result to the one applier (`Ctx::apply`).
//! The request handlers are glue: they decode and check a request, answer it through
//! `Ctx`, and call the group through the adapter.

mod apply;
mod channel;
mod effects;
mod fetch_response;
mod group;
mod leave_describe;
mod offset_requests;
mod offsets;
mod register;
#[cfg(test)]
mod tests;

pub(in crate::core) use effects::NativeEnv;
pub(in crate::core) use fetch_response::fetch_response;
pub(crate) use group::{debounce_ms, Member, NativeGroup};
pub(crate) use offsets::Waiter;
