//! The host's integration tests, one binary for all of them (each was its own binary,
//! and each linked the whole broker again): real brokers started in-process or as the
//! built `drover` binary, real plugin `.so` files, real ZooKeeper servers from the
//! testkit (one shared per process, [`ZkServer::shared`]; a test that stops its server
//! starts a dedicated one).
//!
//! Run one area with a filter: `cargo test -p drover-host --test all share_delivery::`.
//!
//! [`ZkServer::shared`]: drover_tests::services::zookeeper::ZkServer::shared

mod acl_authorizer_zookeeper;
mod cli;
mod native_group;
mod plugins_test_cli;
mod share_delivery;
mod topic_deletion_store;
mod txn_zk_store;
mod zookeeper_lent_session;
