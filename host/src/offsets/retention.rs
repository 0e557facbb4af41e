//! Offset retention with Kafka's semantics (KIP-211): a group's committed offsets
//! expire `offsets.retention_ms` after the group became empty — here, after the later
//! of its newest commit and the moment this broker first saw it without members. A
//! group with members keeps its offsets however old they are. Runs every
//! `offsets.retention_check_interval_ms` against the active store, whichever it is.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Duration,
};

use crate::broker::Broker;

/// Groups that have members now, according to the coordinator; `None` when it cannot
/// say (then nothing expires this round).
async fn groups_with_members(broker: &Broker) -> Option<BTreeSet<String>> {
    let groups = broker.coordinator()?.describe_groups(None).await.ok()?;
    Some(
        groups
            .into_iter()
            .filter(|g| g.error_code.is_none() && !g.members.is_empty())
            .map(|g| g.group_id)
            .collect(),
    )
}

/// Which of `stored` groups expire at `now_ms`: empty ones whose newest commit and
/// first-seen-empty time are both older than `retention_ms`. `empty_since` is updated.
pub fn expired(
    now_ms: i64,
    retention_ms: i64,
    with_members: &BTreeSet<String>,
    newest_commit: &BTreeMap<String, i64>,
    empty_since: &mut BTreeMap<String, i64>,
) -> Vec<String> {
    empty_since.retain(|g, _| newest_commit.contains_key(g) && !with_members.contains(g));
    let mut out = Vec::new();
    for (group, newest) in newest_commit {
        if with_members.contains(group) {
            continue;
        }
        let since = *empty_since.entry(group.clone()).or_insert(now_ms);
        if now_ms.saturating_sub((*newest).max(since)) >= retention_ms {
            out.push(group.clone());
        }
    }
    out
}

/// Runs retention until shutdown.
pub async fn run(broker: Arc<Broker>) {
    let section = broker.config.offsets.clone();
    if section.retention_ms < 0 {
        return;
    }
    let mut stopping = broker.stopping();
    let mut empty_since: BTreeMap<String, i64> = BTreeMap::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(section.retention_check_interval_ms)) => {}
            _ = stopping.wait_for(|s| *s) => return,
        }
        let Some(stores) = broker.offsets() else {
            continue;
        };
        let Some(with_members) = groups_with_members(&broker).await else {
            continue;
        };
        let scan = {
            let stores = Arc::clone(&stores);
            tokio::task::spawn_blocking(move || {
                let mut newest = BTreeMap::new();
                for group in stores.list_groups()? {
                    let latest = stores
                        .fetch_group(&group)?
                        .iter()
                        .map(|r| r.commit_time_ms)
                        .max()
                        .unwrap_or(0);
                    newest.insert(group, latest);
                }
                Ok::<_, crate::plugins::CallError>(newest)
            })
            .await
        };
        let newest = match scan {
            Ok(Ok(newest)) => newest,
            Ok(Err(e)) => {
                tracing::warn!("offset retention: reading the offset store: {e}");
                continue;
            }
            Err(_) => continue,
        };
        let now = crate::clock::now_ms();
        for group in expired(
            now,
            section.retention_ms,
            &with_members,
            &newest,
            &mut empty_since,
        ) {
            let stores = Arc::clone(&stores);
            let g = group.clone();
            match tokio::task::spawn_blocking(move || stores.delete_group(&g)).await {
                Ok(Ok(n)) => {
                    empty_since.remove(&group);
                    tracing::info!(%group, offsets = n, "committed offsets expired (group empty past offsets.retention_ms)");
                }
                Ok(Err(e)) => tracing::warn!(%group, "offset retention: deleting: {e}"),
                Err(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_empty_groups_past_retention_expire() {
        let members: BTreeSet<String> = ["busy".to_string()].into();
        let newest: BTreeMap<String, i64> = [
            ("busy".to_string(), 0),
            ("old".to_string(), 0),
            ("recent".to_string(), 900),
        ]
        .into();
        let mut since = BTreeMap::new();
        // First look at t=1000: `old` is first seen empty now, so it waits.
        assert!(expired(1000, 500, &members, &newest, &mut since).is_empty());
        // t=1499: 499 ms empty, not yet.
        assert!(expired(1499, 500, &members, &newest, &mut since).is_empty());
        // t=1500: `old` expires; `recent` committed at 900 and seen empty at 1000.
        assert_eq!(
            expired(1500, 500, &members, &newest, &mut since),
            ["old", "recent"]
        );
        // A group with members never expires.
        assert!(!expired(10_000, 500, &members, &newest, &mut since).contains(&"busy".to_string()));
    }
}
