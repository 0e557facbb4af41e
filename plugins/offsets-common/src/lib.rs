//! Code shared by Drover's built-in offset-store plugins (`embedded`, `zookeeper`,
//! `postgres`): [`group_commit`], which lets concurrent committers share one durable
//! transaction, and [`share_codec`], the bytes they keep for a share-partition's state.

pub mod group_commit;
pub mod share_codec;

pub use group_commit::GroupCommit;
