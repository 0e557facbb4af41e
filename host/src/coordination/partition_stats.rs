//! The partition table the broker sends its coordinator for assignors (coordinator ABI
//! 3.3's `CoordinatorInput::PartitionStats`; docs/plugins.md, "What an assignor sees"):
//! per partition its leader, and for a partition this broker leads its log start and
//! end offsets and its produce rate ([`crate::broker::produce_rate`]); each named
//! broker's rack.
//!
//! [`collect`] builds the table from the broker's state; [`forward_partition_stats`]
//! sends it at startup, after every topic change and every
//! `coordinator.partition_stats_interval_ms`. The driver passes it on only to a
//! coordinator built against ABI 3.3 or later. Cost of one table: a pass over every
//! partition, locking each log only to read two offsets; about 100 bytes per partition.

use std::{sync::Arc, time::Duration};

use abi_stable::std_types::{ROption, RString, RVec};
use drover_abi::assignor::{BrokerContext, PartitionContext, TopicContext};

use crate::broker::Broker;

use super::driver::CoordinatorClient;

/// The table at `now_ms` (wall clock, ms since the epoch; the produce rates' clock):
/// `(brokers, topics)`, every local topic with each of its partitions ascending.
///
/// Standalone: every partition is led by this broker (`server.broker_id`), which is the
/// one broker listed, with its `server.rack`. Cluster mode: the brokers are those
/// registered in ZooKeeper with their racks; a partition's leader comes from the
/// cluster metadata (`None` while its leader is down or the partition is not placed);
/// offsets and rates are filled only for partitions this broker leads, `None` for the
/// others (their logs are on other brokers).
pub fn collect(broker: &Broker, now_ms: i64) -> (RVec<BrokerContext>, RVec<TopicContext>) {
    let view = broker.cluster().map(|c| (c.me, c.view()));
    let brokers: RVec<BrokerContext> = match &view {
        None => vec![BrokerContext {
            broker_id: broker.identity.node.id,
            rack: rack(broker.identity.node.rack.as_deref()),
        }]
        .into(),
        Some((_, view)) => view
            .brokers
            .iter()
            .map(|(id, addr)| BrokerContext {
                broker_id: *id,
                rack: rack(addr.rack.as_deref()),
            })
            .collect(),
    };
    let leader_of = |topic: &str, partition: usize| -> Option<i32> {
        match &view {
            None => Some(broker.identity.node.id),
            Some((_, view)) => view
                .topics
                .get(topic)
                .and_then(|t| t.leaders.get(partition).copied())
                .filter(|l| view.brokers.contains_key(l)),
        }
    };
    let me = view.as_ref().map_or(broker.identity.node.id, |(me, _)| *me);
    let topics = broker
        .topics
        .list()
        .iter()
        .map(|topic| {
            let partitions: Vec<PartitionContext> = topic
                .partitions
                .iter()
                .enumerate()
                .map(|(i, partition)| {
                    let mut p = PartitionContext::unknown(partition.index);
                    let leader = leader_of(&topic.name, i);
                    p.leader = leader.into();
                    if leader == Some(me) {
                        let (start, end) = {
                            let log = partition.lock_log();
                            (log.log_start_offset(), log.log_end_offset())
                        };
                        // Not measured yet (just started): unknown, not 0.
                        let rate = partition.produce_rate.rate(now_ms);
                        p.log_start_offset = ROption::RSome(start);
                        p.log_end_offset = ROption::RSome(end);
                        p.produce_bytes_per_sec = rate.map(|r| r.bytes_per_sec).into();
                        p.produce_records_per_sec = rate.map(|r| r.records_per_sec).into();
                    }
                    p
                })
                .collect();
            TopicContext {
                topic: RString::from(topic.name.as_str()),
                partitions: partitions.into(),
            }
        })
        .collect();
    (brokers, topics)
}

fn rack(rack: Option<&str>) -> ROption<RString> {
    rack.map(RString::from).into()
}

/// Wall-clock ms since the Unix epoch (the produce path counts in it).
fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Sends the table now, after every topic creation, deletion or partition addition,
/// and every `coordinator.partition_stats_interval_ms`, until the coordinator or the
/// broker stops. Spawned by `drover serve` beside the topic forwarding. The table is
/// built on the blocking pool (it locks every log briefly).
pub async fn forward_partition_stats(broker: Arc<Broker>, client: CoordinatorClient) {
    let interval = Duration::from_millis(broker.config.coordinator.partition_stats_interval_ms);
    let mut changes = broker.topics.subscribe_changes();
    let mut stopping = broker.stopping();
    // The first tick one interval from now: the table is sent at once below.
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let b = Arc::clone(&broker);
        let Ok((brokers, topics)) =
            tokio::task::spawn_blocking(move || collect(&b, wall_clock_ms())).await
        else {
            return;
        };
        if client.partition_stats(brokers, topics).await.is_err() {
            return;
        }
        tokio::select! {
            _ = ticks.tick() => {}
            changed = changes.changed() => if changed.is_err() { return },
            _ = stopping.wait_for(|stop| *stop) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::config::Config;

    /// Per topic, the partitions of a table.
    fn by_topic(topics: &[TopicContext]) -> BTreeMap<&str, &[PartitionContext]> {
        topics
            .iter()
            .map(|t| (t.topic.as_str(), t.partitions.as_slice()))
            .collect()
    }

    /// A standalone broker on a temporary data directory, id 4, rack `r1`, no plugins.
    fn broker(dir: &std::path::Path) -> Broker {
        let mut config = Config {
            data_dir: dir.join("data"),
            ..Config::default()
        };
        config.plugins.dir = dir.join("no-plugins");
        config.server.rack = Some("r1".into());
        config.server.max_connections = 10;
        config.log.open_files_cache = 16;
        let plugins = crate::startup::load_plugins(&config).unwrap();
        let node = crate::broker::NodeInfo {
            id: 4,
            host: "127.0.0.1".into(),
            port: 9092,
            rack: config.server.rack.clone(),
            endpoints: Default::default(),
        };
        Broker::open(config, node, plugins, None).unwrap()
    }

    #[test]
    fn a_standalone_table_names_this_broker_and_measures_its_logs() {
        let dir = tempfile::tempdir().unwrap();
        let broker = broker(dir.path());
        broker.topics.create("t", 2, 10).unwrap();
        let now = 1_700_000_000_000;
        let topic = broker.topics.get("t").unwrap();
        topic.partitions[1].produce_rate.record(now, 6_000, 60);
        let (brokers, topics) = collect(&broker, now + 6_000);
        assert_eq!(brokers.len(), 1);
        assert_eq!(brokers[0].broker_id, 4);
        assert_eq!(brokers[0].rack, ROption::RSome("r1".into()));
        let parts = by_topic(&topics)["t"];
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].leader, ROption::RSome(4));
        assert_eq!(parts[0].log_start_offset, ROption::RSome(0));
        assert_eq!(parts[0].log_end_offset, ROption::RSome(0));
        // No append and the window not over since the partition opened: unknown.
        assert_eq!(parts[0].produce_bytes_per_sec, ROption::RNone);
        assert_eq!(parts[1].produce_bytes_per_sec, ROption::RSome(1_000.0));
        assert_eq!(parts[1].produce_records_per_sec, ROption::RSome(10.0));
        assert_eq!(parts[1].committed_offset, ROption::RNone);
    }
}
