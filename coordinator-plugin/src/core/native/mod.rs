//! Native groups (docs/protocol.md §6), by job: the group with its rebalance engine
//! (`group`: members, zombies, phases, the safety check), its pending commit batch and
//! non-regression rules (`offsets`), and the native requests by API family —
//! RegisterConsumer (`register`), CommitOffset and FetchOffsets (`offset_requests`, with
//! the FetchOffsets answer in `fetch_response`), LeaveGroup and DescribeGroups
//! (`leave_describe`) — and the consumers' answers on their channels (`channel`).
//!
//! The group is pure, as the KIP-848 engine is: its methods read a [`NativeEnv`] and
//! record their decisions in [`Effects`] (`effects`: what a group reads and may decide),
//! and never see the coordinator's shared state. One adapter (`apply`,
//! `Ctx::native`) builds the environment for a call and applies the effects in order.
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

pub(in crate::core) use effects::{Effects, NativeEffect, NativeEnv};
pub(in crate::core) use fetch_response::fetch_response;
pub(crate) use group::{debounce_ms, Member, NativeGroup};
pub(crate) use offsets::Waiter;
