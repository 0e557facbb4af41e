//! One module per Kafka API. Each handler turns a decoded request into a response;
//! Kafka error codes are response values, never `Err`.

pub mod acls;
pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_configs;
pub mod alter_share_group_offsets;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_records;
pub mod delete_share_group_offsets;
pub mod delete_topics;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_share_group_offsets;
pub mod describe_topic_partitions;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod end_txn;
pub mod errors;
pub mod fetch;
pub mod find_coordinator;
pub mod group_configs;
pub mod init_producer_id;
pub mod list_offsets;
pub mod list_transactions;
pub mod metadata;
pub mod produce;
pub mod sasl;
pub mod share_acknowledge;
pub mod share_acks;
pub mod share_fetch;
pub mod share_group_state;
pub mod txn_offset_commit;
pub mod txn_wire;

use std::sync::Arc;

use kafka_protocol::{error::ResponseError, messages::RequestKind};

use super::{
    budget::ConnBudget,
    dispatch::Request,
    reply::{Handled, Reply},
};
use crate::{broker::Broker, share::sessions::Origin};

/// Routes a request from the client at address `peer`, on the connection `ctx`
/// describes, to its handler. A Fetch reads no more than `budget` allows. The APIs
/// that name brokers answer with the addresses of `ctx`'s listener.
pub async fn handle(
    broker: &Arc<Broker>,
    budget: &Arc<ConnBudget>,
    peer: std::net::IpAddr,
    ctx: &super::context::ConnContext,
    authz: &crate::authz::RequestAuthz,
    request: Request,
) -> Handled {
    let version = request.version;
    let checks = authz.clone();
    match request.body {
        RequestKind::ApiVersions(_) => api_versions::handle(broker.coordinator(), version).into(),
        // Metadata may auto-create topics, and topic changes do file I/O and fsyncs:
        // they run on the blocking pool, never on the async workers.
        RequestKind::Metadata(r) => {
            let listener = ctx.listener.clone();
            blocking(broker, move |b| {
                metadata::handle(b, &checks, &listener, version, r)
            })
            .await
        }
        RequestKind::Produce(r) => produce::handle(broker, authz, version, r).await,
        RequestKind::Fetch(r) => {
            // A long poll must not hold up later requests on the connection.
            let broker = Arc::clone(broker);
            let budget = Arc::clone(budget);
            Handled::Deferred(Box::pin(async move {
                fetch::handle(&broker, &checks, &budget, version, r).await
            }))
        }
        // Share groups' delivery (KIP-932): the session step now, in request order; the
        // acknowledgements and the long poll deferred.
        RequestKind::ShareFetch(r) => match share_fetch::prepare(
            broker,
            authz,
            Origin {
                addr: peer,
                conn: ctx.conn,
            },
            r,
        ) {
            // A refused session is answered after the throttle time it states, as
            // Kafka mutes a throttled client's channel (KIP-219): librdkafka retries a
            // refusal at once, whatever the throttle time says.
            Err(reply) if reply.error == ResponseError::ShareSessionLimitReached.code() => {
                Handled::Deferred(Box::pin(async move {
                    let wait = share_fetch::REFUSED_SESSION_THROTTLE_MS.unsigned_abs();
                    tokio::time::sleep(std::time::Duration::from_millis(u64::from(wait))).await;
                    *reply
                }))
            }
            Err(reply) => (*reply).into(),
            Ok(prepared) => {
                let broker = Arc::clone(broker);
                let budget = Arc::clone(budget);
                Handled::Deferred(Box::pin(async move {
                    share_fetch::serve(&broker, &budget, prepared).await
                }))
            }
        },
        // Each acknowledgement is written to the offset store before it is answered.
        RequestKind::ShareAcknowledge(r) => {
            blocking(broker, move |b| share_acknowledge::handle(b, &checks, r)).await
        }
        RequestKind::ListOffsets(r) => {
            blocking(broker, move |b| {
                list_offsets::handle(b.partitions(), &checks, version, r)
            })
            .await
        }
        RequestKind::CreateTopics(r) => {
            blocking(broker, move |b| {
                create_topics::handle(b, &checks, version, r)
            })
            .await
        }
        RequestKind::DeleteTopics(r) => {
            blocking(broker, move |b| {
                delete_topics::handle(b.partitions(), &checks, version, r)
            })
            .await
        }
        RequestKind::CreatePartitions(r) => {
            blocking(broker, move |b| {
                create_partitions::handle(b, &checks, version, r)
            })
            .await
        }
        RequestKind::FindCoordinator(r) => {
            find_coordinator::handle(broker, authz, &ctx.listener, version, r).into()
        }
        RequestKind::DeleteRecords(r) => {
            blocking(broker, move |b| {
                delete_records::handle(b.partitions(), &checks, version, r)
            })
            .await
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            blocking(broker, move |b| {
                alter_configs::handle_incremental(b, &checks, version, r)
            })
            .await
        }
        RequestKind::AlterConfigs(r) => {
            blocking(broker, move |b| {
                alter_configs::handle_legacy(b, &checks, version, r)
            })
            .await
        }
        RequestKind::DescribeConfigs(r) => {
            describe_configs::handle(broker, authz, version, r).into()
        }
        RequestKind::DescribeCluster(r) => {
            describe_cluster::handle(broker, authz, &ctx.listener, version, r).into()
        }
        RequestKind::InitProducerId(r) => {
            blocking(broker, move |b| {
                init_producer_id::handle(&b.producers, &checks, version, r, peer)
            })
            .await
        }
        // Transaction state changes are fsynced: on the blocking pool.
        RequestKind::AddPartitionsToTxn(r) => {
            blocking(broker, move |b| {
                let state = add_partitions_to_txn::State {
                    txn: &b.producers.transactions,
                    topics: &b.topics,
                    authz: &checks,
                };
                add_partitions_to_txn::handle(state, version, r)
            })
            .await
        }
        RequestKind::AddOffsetsToTxn(r) => {
            blocking(broker, move |b| {
                add_offsets_to_txn::handle(&b.producers.transactions, &checks, version, r)
            })
            .await
        }
        RequestKind::EndTxn(r) => {
            blocking(broker, move |b| {
                end_txn::handle(&b.producers.transactions, &checks, version, r)
            })
            .await
        }
        RequestKind::DescribeTransactions(r) => {
            describe_transactions::handle(&broker.producers.transactions, authz, r).into()
        }
        RequestKind::ListTransactions(r) => {
            list_transactions::handle(&broker.producers.transactions, authz, r).into()
        }
        // SCRAM credentials (KIP-554): a ZooKeeper read or an fsynced write.
        RequestKind::DescribeUserScramCredentials(r) => {
            blocking(broker, move |b| {
                describe_user_scram_credentials::handle(b.identity.sasl.credentials(), &checks, r)
            })
            .await
        }
        RequestKind::AlterUserScramCredentials(r) => {
            blocking(broker, move |b| {
                alter_user_scram_credentials::handle(b.identity.sasl.credentials(), &checks, r)
            })
            .await
        }
        // The admin APIs tools call (issue 32). DescribeLogDirs and DescribeProducers lock
        // partition logs (and read the file system): on the blocking pool.
        RequestKind::DescribeLogDirs(r) => {
            blocking(broker, move |b| {
                describe_log_dirs::handle(b.partitions(), &checks, r)
            })
            .await
        }
        RequestKind::DescribeProducers(r) => {
            blocking(broker, move |b| {
                describe_producers::handle(b.partitions(), &checks, r)
            })
            .await
        }
        // Reads the share state from the offset store: on the blocking pool.
        RequestKind::DescribeShareGroupOffsets(r) => {
            blocking(broker, move |b| {
                describe_share_group_offsets::handle(b, &checks, r)
            })
            .await
        }
        // Only for an empty share group: the coordinator says so (DescribeGroups), then
        // the offset store is written on the blocking pool.
        RequestKind::AlterShareGroupOffsets(r) => {
            alter_share_group_offsets::handle(broker, authz, r)
                .await
                .into()
        }
        RequestKind::DeleteShareGroupOffsets(r) => {
            delete_share_group_offsets::handle(broker, authz, r)
                .await
                .into()
        }
        RequestKind::DescribeClientQuotas(r) => describe_client_quotas::handle(authz, r).into(),
        RequestKind::DescribeTopicPartitions(r) => {
            describe_topic_partitions::handle(broker.partitions(), &ctx.listener, authz, r).into()
        }
        // ACLs (issue 30 item 5): the plugin's calls run on the blocking pool, budgeted.
        RequestKind::DescribeAcls(r) => acls::describe(&broker.identity.authz, authz, r)
            .await
            .into(),
        RequestKind::CreateAcls(r) => acls::create(&broker.identity.authz, authz, r).await.into(),
        RequestKind::DeleteAcls(r) => acls::delete(&broker.identity.authz, authz, r).await.into(),
        // Only on a listener without SASL: a SASL listener's connection answers these.
        RequestKind::SaslHandshake(_) => sasl::handshake().into(),
        RequestKind::SaslAuthenticate(_) => sasl::authenticate().into(),
        // Reached only when the coordinator does not serve it (ABI before 3.4).
        RequestKind::TxnOffsetCommit(r) => txn_offset_commit::handle(r).into(),
        // Not reachable: dispatch only decodes APIs of its handler table.
        _ => Reply::silent(ResponseError::InvalidRequest.code()).into(),
    }
}

/// Runs a synchronous handler on the blocking pool.
async fn blocking(
    broker: &Arc<Broker>,
    handler: impl FnOnce(&Arc<Broker>) -> Reply + Send + 'static,
) -> Handled {
    let broker = Arc::clone(broker);
    match tokio::task::spawn_blocking(move || handler(&broker)).await {
        Ok(reply) => reply.into(),
        Err(_) => Reply::silent(ResponseError::UnknownServerError.code()).into(),
    }
}
