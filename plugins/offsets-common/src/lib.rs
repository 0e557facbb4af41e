//! Code shared by Drover's built-in offset-store plugins (`embedded`, `postgres`):
//! [`group_commit`], which lets concurrent committers share one durable transaction.

pub mod group_commit;

pub use group_commit::GroupCommit;
