//! Share groups' part of `GET /metrics` (issue 31 item 5), rendered at scrape time in
//! the Prometheus text format from the share-partitions in this broker's memory
//! ([`super::SharePartitions::stats`]):
//!
//! - broker-wide: `drover_share_partitions_loaded` (gauge): share-partitions in memory;
//!   `drover_share_records_in_flight` (gauge): records acquired by members, under a
//!   lock; `drover_share_deliveries_total{delivery_count}`: deliveries by their
//!   delivery count (`1` first deliveries, `2` second ones, …, `10` the tenth and
//!   later), so redeliveries show; `drover_share_records_acknowledged_total` and
//!   `drover_share_records_archived_total` (rejected, gaps, aborted, or at the
//!   delivery-count limit). The counters include share-partitions since dropped from
//!   memory, so they never go down while the broker runs.
//! - per share-partition (labels `group`, `topic`, `partition`), for at most
//!   `share.metrics_max_share_partitions` of them, the first in (group, topic,
//!   partition) order, so the series a scrape holds stay bounded whatever clients do:
//!   `drover_share_partition_start_offset` and `drover_share_partition_end_offset`
//!   (gauges), `drover_share_partition_records_in_flight` (gauge),
//!   `drover_share_partition_deliveries_total{…,delivery_count}` (buckets with a count
//!   only) and `drover_share_partition_records_archived_total`, counted since the
//!   share-partition was loaded. `drover_share_partitions_unlisted` (gauge) says how
//!   many loaded share-partitions were left out.

use std::fmt::Write;

use drover_share::{ShareCounters, ShareStats, DELIVERY_BUCKETS};

use super::ShareKey;

/// The samples of `loaded` (each loaded share-partition's stats, in key order) and
/// `retired` (the counters of those dropped from memory), with per share-partition
/// series for the first `max_listed`, as Prometheus text lines (no `# EOF`).
pub fn render(
    loaded: &[(ShareKey, ShareStats)],
    retired: &ShareCounters,
    max_listed: usize,
) -> String {
    let mut out = String::new();
    let mut total = *retired;
    let mut in_flight = 0u64;
    for (_, s) in loaded {
        total.add(&s.counters);
        in_flight = in_flight.saturating_add(s.window.acquired);
    }
    gauge(
        &mut out,
        "drover_share_partitions_loaded",
        "Share-partitions (share group x topic-partition) in this broker's memory.",
        &[("", loaded.len() as u64)],
    );
    gauge(
        &mut out,
        "drover_share_records_in_flight",
        "Records acquired by share-group members, under an acquisition lock.",
        &[("", in_flight)],
    );
    head(
        &mut out,
        "drover_share_deliveries",
        "Share-group deliveries by delivery count (10: the tenth and later).",
        "counter",
    );
    for (i, n) in total.deliveries.iter().enumerate() {
        let _ = writeln!(
            out,
            "drover_share_deliveries_total{{delivery_count=\"{}\"}} {n}",
            i + 1
        );
    }
    for (name, help, n) in [
        (
            "drover_share_records_acknowledged",
            "Share-group records acknowledged (Accept).",
            total.acknowledged,
        ),
        (
            "drover_share_records_archived",
            "Share-group records archived: rejected, gaps, aborted, or at the delivery-count limit.",
            total.archived,
        ),
    ] {
        head(&mut out, name, help, "counter");
        let _ = writeln!(out, "{name}_total {n}");
    }
    let listed = &loaded[..loaded.len().min(max_listed)];
    gauge(
        &mut out,
        "drover_share_partitions_unlisted",
        "Loaded share-partitions without series of their own (past share.metrics_max_share_partitions).",
        &[("", (loaded.len() - listed.len()) as u64)],
    );
    type Value = fn(&ShareStats) -> i64;
    for (name, help, value) in [
        (
            "drover_share_partition_start_offset",
            "Share-partition start offset: every record below it is acknowledged or archived.",
            (|s: &ShareStats| s.start_offset) as Value,
        ),
        (
            "drover_share_partition_end_offset",
            "Share-partition end offset: one past the last offset fetched.",
            (|s: &ShareStats| s.end_offset) as Value,
        ),
        (
            "drover_share_partition_records_in_flight",
            "Records of the share-partition acquired by members.",
            (|s: &ShareStats| i64::try_from(s.window.acquired).unwrap_or(i64::MAX)) as Value,
        ),
    ] {
        head(&mut out, name, help, "gauge");
        for (key, s) in listed {
            let _ = writeln!(out, "{name}{{{}}} {}", labels(key), value(s));
        }
    }
    head(
        &mut out,
        "drover_share_partition_records_archived",
        "Records of the share-partition archived since it was loaded.",
        "counter",
    );
    for (key, s) in listed {
        let _ = writeln!(
            out,
            "drover_share_partition_records_archived_total{{{}}} {}",
            labels(key),
            s.counters.archived
        );
    }
    head(
        &mut out,
        "drover_share_partition_deliveries",
        "Deliveries of the share-partition's records since it was loaded, by delivery count.",
        "counter",
    );
    for (key, s) in listed {
        for i in 0..DELIVERY_BUCKETS {
            let n = s.counters.deliveries[i];
            if n > 0 || i == 0 {
                let _ = writeln!(
                    out,
                    "drover_share_partition_deliveries_total{{{},delivery_count=\"{}\"}} {n}",
                    labels(key),
                    i + 1
                );
            }
        }
    }
    out
}

fn head(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn gauge(out: &mut String, name: &str, help: &str, samples: &[(&str, u64)]) {
    head(out, name, help, "gauge");
    for (labels, n) in samples {
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {n}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {n}");
        }
    }
}

/// `group="…",topic="…",partition="…"`, the group id escaped (any string a client
/// chose); topic names are `[a-zA-Z0-9._-]`.
fn labels(key: &ShareKey) -> String {
    format!(
        "group=\"{}\",topic=\"{}\",partition=\"{}\"",
        escape(&key.group),
        escape(&key.topic),
        key.partition
    )
}

/// A label value escaped as the text format wants: `\`, `"` and line feeds.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use drover_share::WindowCounts;

    use super::*;

    fn stats(group: &str, partition: i32, acquired: u64, archived: u64) -> (ShareKey, ShareStats) {
        let mut deliveries = [0; DELIVERY_BUCKETS];
        deliveries[..2].copy_from_slice(&[7, 2]);
        let counters = ShareCounters {
            archived,
            deliveries,
            ..ShareCounters::default()
        };
        (
            ShareKey {
                group: Arc::from(group),
                topic: Arc::from("t"),
                partition,
            },
            ShareStats {
                start_offset: 3,
                end_offset: 9,
                window: WindowCounts {
                    acquired,
                    ..WindowCounts::default()
                },
                counters,
            },
        )
    }

    #[test]
    fn totals_include_retired_counters_and_listing_stops_at_the_cap() {
        let loaded = vec![stats("g\"1", 0, 2, 1), stats("g2", 1, 3, 4)];
        let retired = ShareCounters {
            archived: 10,
            ..ShareCounters::default()
        };
        let text = render(&loaded, &retired, 1);
        assert!(
            text.contains("drover_share_partitions_loaded 2\n"),
            "{text}"
        );
        assert!(
            text.contains("drover_share_records_in_flight 5\n"),
            "{text}"
        );
        assert!(
            text.contains("drover_share_records_archived_total 15\n"),
            "{text}"
        );
        assert!(
            text.contains("drover_share_deliveries_total{delivery_count=\"2\"} 4\n"),
            "{text}"
        );
        assert!(
            text.contains("drover_share_partitions_unlisted 1\n"),
            "{text}"
        );
        let first = "group=\"g\\\"1\",topic=\"t\",partition=\"0\"";
        assert!(
            text.contains(&format!(
                "drover_share_partition_records_in_flight{{{first}}} 2\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "drover_share_partition_deliveries_total{{{first},delivery_count=\"2\"}} 2\n"
            )),
            "{text}"
        );
        assert!(!text.contains("group=\"g2\""), "past the cap: {text}");
    }

    #[test]
    fn nothing_loaded_still_renders_every_family() {
        let text = render(&[], &ShareCounters::default(), 100);
        for family in [
            "drover_share_partitions_loaded",
            "drover_share_partition_start_offset",
            "drover_share_partition_deliveries",
        ] {
            assert!(text.contains(&format!("# TYPE {family} ")), "{text}");
        }
    }
}
