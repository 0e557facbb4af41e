//! Native groups (docs/protocol.md §6), by job: the group with its rebalance engine
//! (`group`: members, zombies, phases, the safety check), its pending commit batch and
//! non-regression rules (`offsets`), and the native requests by API family —
//! RegisterConsumer (`register`), CommitOffset and FetchOffsets (`offset_requests`, with
//! the FetchOffsets answer in `fetch_response`), LeaveGroup and DescribeGroups
//! (`leave_describe`) — and the consumers' answers on their channels (`channel`).

mod apply;
mod channel;
mod effects;
mod fetch_response;
mod group;
mod leave_describe;
mod offset_requests;
mod offsets;
mod register;

pub(in crate::core) use effects::{Effects, NativeEnv};
pub(in crate::core) use fetch_response::fetch_response;
pub(crate) use group::{Member, NativeGroup};
pub(crate) use offsets::Waiter;
