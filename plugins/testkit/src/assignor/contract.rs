//! Checkers of one assignment against the contract in [`drover_abi::assignor`]: the
//! assignment rules ([`check_rules`]) and the documented output order
//! ([`check_order`]). Each returns the first violation found, as a sentence.

use std::collections::{BTreeSet, HashMap, HashSet};

use drover_abi::{AssignInput, Assignment};

/// Both checks: [`check_rules`], then [`check_order`].
pub fn check_contract(input: &AssignInput, output: &Assignment) -> Result<(), String> {
    check_rules(input, output)?;
    check_order(output)
}

/// The assignment rules, for an `input` whose member ids are distinct and whose topics
/// are listed once: every input member appears exactly once in the output and no other
/// member does; a member gets only topics it subscribes to that are in the input, and
/// only partitions in `0..partition count`; every partition of a subscribed topic goes
/// to exactly one member.
pub fn check_rules(input: &AssignInput, output: &Assignment) -> Result<(), String> {
    rules(input, output, Holders::One)
}

/// The share-assignor rules (assignor ABI 3.3, [`drover_abi::assignor`]): those of
/// [`check_rules`], except that a partition of a subscribed topic goes to **at least
/// one** member (possibly several, each listing it once).
pub fn check_share_rules(input: &AssignInput, output: &Assignment) -> Result<(), String> {
    rules(input, output, Holders::AtLeastOne)
}

/// How many members a partition of a subscribed topic goes to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Holders {
    /// Exactly one (consumer groups).
    One,
    /// One or more (share groups).
    AtLeastOne,
}

fn rules(input: &AssignInput, output: &Assignment, holders: Holders) -> Result<(), String> {
    let subscriptions: HashMap<&str, BTreeSet<&str>> = input
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.as_str(),
                m.topics.iter().map(|t| t.as_str()).collect(),
            )
        })
        .collect();
    let mut present = HashSet::new();
    for m in output.members.iter() {
        let id = m.member_id.as_str();
        if !subscriptions.contains_key(id) {
            return Err(format!("output names member `{id}`, not in the input"));
        }
        if !present.insert(id) {
            return Err(format!("member `{id}` appears twice in the output"));
        }
    }
    let mut missing: Vec<&str> = subscriptions
        .keys()
        .copied()
        .filter(|id| !present.contains(id))
        .collect();
    missing.sort_unstable();
    if let Some(id) = missing.first() {
        return Err(format!("member `{id}` is missing from the output"));
    }

    let counts: HashMap<&str, u32> = input
        .topics
        .iter()
        .map(|t| (t.name.as_str(), t.partitions))
        .collect();
    let mut holder: HashMap<(&str, i32), &str> = HashMap::new();
    for m in output.members.iter() {
        let id = m.member_id.as_str();
        for tp in m.partitions.iter() {
            let topic = tp.topic.as_str();
            let Some(&n) = counts.get(topic) else {
                return Err(format!("`{id}` got unknown topic `{topic}`"));
            };
            if !subscriptions[id].contains(topic) {
                return Err(format!(
                    "`{id}` got `{topic}`, which it does not subscribe to"
                ));
            }
            for &p in tp.partitions.iter() {
                if p < 0 || p as u32 >= n {
                    return Err(format!(
                        "`{id}` got partition {p} of `{topic}`, which has {n}"
                    ));
                }
                match holder.insert((topic, p), id) {
                    Some(other) if other == id => {
                        return Err(format!("`{id}` lists partition {p} of `{topic}` twice"));
                    }
                    Some(other) if holders == Holders::One => {
                        return Err(format!(
                            "partition {p} of `{topic}` given to `{other}` and to `{id}`"
                        ));
                    }
                    _ => {}
                }
            }
        }
    }
    let subscribed: BTreeSet<&str> = subscriptions.values().flatten().copied().collect();
    for topic in subscribed {
        for p in 0..counts.get(topic).copied().unwrap_or(0) as i32 {
            if !holder.contains_key(&(topic, p)) {
                return Err(format!("partition {p} of `{topic}` is not assigned"));
            }
        }
    }
    Ok(())
}

/// The documented output order: members sorted by the bytes of their ids, each
/// member's topics by name, each topic's partitions strictly ascending, and no topic
/// entry without partitions.
pub fn check_order(output: &Assignment) -> Result<(), String> {
    let ids: Vec<&str> = output
        .members
        .iter()
        .map(|m| m.member_id.as_str())
        .collect();
    if let Some(w) = ids.windows(2).find(|w| w[0] >= w[1]) {
        return Err(format!(
            "members not sorted by id: `{}` before `{}`",
            w[0], w[1]
        ));
    }
    for m in output.members.iter() {
        let id = m.member_id.as_str();
        let topics: Vec<&str> = m.partitions.iter().map(|tp| tp.topic.as_str()).collect();
        if let Some(w) = topics.windows(2).find(|w| w[0] >= w[1]) {
            return Err(format!(
                "`{id}`: topics not sorted by name: `{}` before `{}`",
                w[0], w[1]
            ));
        }
        for tp in m.partitions.iter() {
            if tp.partitions.is_empty() {
                return Err(format!("`{id}`: empty entry for `{}`", tp.topic));
            }
            if tp.partitions.windows(2).any(|w| w[0] >= w[1]) {
                return Err(format!(
                    "`{id}`: partitions of `{}` not strictly ascending: {:?}",
                    tp.topic,
                    tp.partitions.as_slice()
                ));
            }
        }
    }
    Ok(())
}
