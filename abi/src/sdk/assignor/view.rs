//! The validated, indexed view of an [`AssignInput`] every policy works on.

use std::collections::HashMap;

use crate::{AssignInput, AssignorMember, PluginError};

/// Marks an input topic no member subscribes to (or one without partitions).
const NOT_IN_VIEW: u32 = u32::MAX;

/// A group member in the view.
#[derive(Debug)]
pub struct MemberView<'a> {
    /// The member id.
    pub id: &'a str,
    /// Indexes (into [`GroupView::topics`]) of the topics it subscribes to that have
    /// partitions; ascending, without duplicates.
    pub topics: Vec<u32>,
    /// The member as given in the input (owned partitions, rack, weight).
    pub input: &'a AssignorMember,
}

impl<'a> MemberView<'a> {
    /// The member's rack (native RegisterConsumer v1 `rack`, KIP-848 `RackId`), if it
    /// declared one.
    pub fn rack(&self) -> Option<&'a str> {
        self.input.rack.as_ref().into_option().map(|r| r.as_str())
    }

    /// The member's declared weight (relative capacity, at least 1).
    pub fn weight(&self) -> u32 {
        self.input.weight.max(1)
    }
}

/// A subscribed topic in the view.
#[derive(Debug)]
pub struct TopicView<'a> {
    /// Topic name.
    pub name: &'a str,
    /// Partition count (at least 1).
    pub partitions: u32,
    /// Global partition id of the topic's partition 0; its partition `p` is `first + p`.
    pub first: u32,
    /// Indexes (into [`GroupView::members`]) of its subscribers, ascending (so in
    /// member-id order).
    pub subscribers: Vec<u32>,
}

/// An [`AssignInput`] checked and indexed: members sorted by id, the topics some member
/// subscribes to (and that have partitions) sorted by name, and every one of their
/// partitions numbered by a dense global id in (topic name, partition) order.
///
/// Subscriptions to topics missing from [`AssignInput::topics`] or with no partitions
/// are dropped (there is nothing to assign for them); topics listed there that nobody
/// subscribes to are left out.
#[derive(Debug)]
pub struct GroupView<'a> {
    members: Vec<MemberView<'a>>,
    topics: Vec<TopicView<'a>>,
    /// Input topic name → index into `AssignInput::topics`.
    by_name: HashMap<&'a str, u32>,
    /// Index into `AssignInput::topics` → index into `topics`, or [`NOT_IN_VIEW`].
    view_index: Vec<u32>,
    partitions: usize,
    homogeneous: bool,
}

impl<'a> GroupView<'a> {
    /// Validates and indexes `input`.
    ///
    /// Errors ([`crate::ErrorKind::InvalidInput`]): two members with the same id,
    /// a topic listed twice, a partition count above `i32::MAX`, or more subscribed
    /// partitions than global ids (`u32::MAX`).
    pub fn new(input: &'a AssignInput) -> Result<Self, PluginError> {
        let sorted = sorted_members(input)?;
        let (by_name, counts) = topic_table(input)?;

        // Each member's subscriptions as input-topic indexes; mark the subscribed ones.
        let mut subscribed = vec![false; counts.len()];
        let mut members: Vec<MemberView<'a>> = sorted
            .into_iter()
            .map(|member| {
                let mut topics = Vec::with_capacity(member.topics.len());
                for name in member.topics.iter() {
                    if let Some(&i) = by_name.get(name.as_str()) {
                        if counts[i as usize] > 0 {
                            subscribed[i as usize] = true;
                            topics.push(i);
                        }
                    }
                }
                MemberView {
                    id: member.member_id.as_str(),
                    topics,
                    input: member,
                }
            })
            .collect();

        let (mut topics, view_index) = view_topics(input, &subscribed)?;
        for (m, member) in members.iter_mut().enumerate() {
            for t in member.topics.iter_mut() {
                *t = view_index[*t as usize];
            }
            member.topics.sort_unstable();
            member.topics.dedup();
            for &t in &member.topics {
                topics[t as usize].subscribers.push(m as u32);
            }
        }
        let partitions = topics
            .last()
            .map_or(0, |t| (t.first + t.partitions) as usize);
        let homogeneous = members.windows(2).all(|w| w[0].topics == w[1].topics);
        Ok(GroupView {
            members,
            topics,
            by_name,
            view_index,
            partitions,
            homogeneous,
        })
    }

    /// The members, sorted by id; a member's index in this slice is its index everywhere.
    pub fn members(&self) -> &[MemberView<'a>] {
        &self.members
    }

    /// The subscribed topics, sorted by name.
    pub fn topics(&self) -> &[TopicView<'a>] {
        &self.topics
    }

    /// Number of partitions to assign (of all subscribed topics); global ids are
    /// `0..partition_count()`.
    pub fn partition_count(&self) -> usize {
        self.partitions
    }

    /// Whether every member subscribes to exactly the same topics (as seen in the view).
    pub fn is_homogeneous(&self) -> bool {
        self.homogeneous
    }

    /// The index in [`Self::topics`] of the topic called `name`, if it is in the view.
    pub fn topic_index(&self, name: &str) -> Option<u32> {
        let &i = self.by_name.get(name)?;
        let t = self.view_index[i as usize];
        (t != NOT_IN_VIEW).then_some(t)
    }

    /// The index in [`Self::topics`] of the topic of global partition id `global`.
    /// `global` must be below [`Self::partition_count`].
    pub fn topic_of(&self, global: u32) -> usize {
        self.topics.partition_point(|t| t.first <= global) - 1
    }
}

/// The members sorted by id; an error if two share an id.
fn sorted_members(input: &AssignInput) -> Result<Vec<&AssignorMember>, PluginError> {
    if input.members.len() >= u32::MAX as usize {
        return Err(PluginError::invalid_input("too many members"));
    }
    let mut sorted: Vec<&AssignorMember> = input.members.iter().collect();
    sorted.sort_unstable_by(|a, b| a.member_id.as_str().cmp(b.member_id.as_str()));
    if let Some(w) = sorted.windows(2).find(|w| w[0].member_id == w[1].member_id) {
        return Err(PluginError::invalid_input(format!(
            "duplicate member id `{}` in group `{}`",
            w[0].member_id, input.group
        )));
    }
    Ok(sorted)
}

/// Name → input index and the partition count of every input topic; an error on a
/// topic listed twice or a count that partition indexes (`i32`) cannot address.
fn topic_table(input: &AssignInput) -> Result<(HashMap<&str, u32>, Vec<u32>), PluginError> {
    let mut by_name = HashMap::with_capacity(input.topics.len());
    let mut counts = Vec::with_capacity(input.topics.len());
    for (i, topic) in input.topics.iter().enumerate() {
        if topic.partitions > i32::MAX as u32 {
            return Err(PluginError::invalid_input(format!(
                "topic `{}` has {} partitions, more than i32::MAX",
                topic.name, topic.partitions
            )));
        }
        if by_name.insert(topic.name.as_str(), i as u32).is_some() {
            return Err(PluginError::invalid_input(format!(
                "topic `{}` is listed twice",
                topic.name
            )));
        }
        counts.push(topic.partitions);
    }
    Ok((by_name, counts))
}

/// The subscribed input topics as view topics sorted by name with their global ids,
/// and the input index → view index table.
fn view_topics<'a>(
    input: &'a AssignInput,
    subscribed: &[bool],
) -> Result<(Vec<TopicView<'a>>, Vec<u32>), PluginError> {
    let mut order: Vec<u32> = (0..subscribed.len() as u32)
        .filter(|&i| subscribed[i as usize])
        .collect();
    order.sort_unstable_by_key(|&i| input.topics[i as usize].name.as_str());
    let mut view_index = vec![NOT_IN_VIEW; subscribed.len()];
    let mut topics = Vec::with_capacity(order.len());
    let mut first: u64 = 0;
    for (t, &i) in order.iter().enumerate() {
        let topic = &input.topics[i as usize];
        view_index[i as usize] = t as u32;
        topics.push(TopicView {
            name: topic.name.as_str(),
            partitions: topic.partitions,
            first: first as u32,
            subscribers: Vec::new(),
        });
        first += u64::from(topic.partitions);
        if first > u64::from(u32::MAX) {
            return Err(PluginError::invalid_input(format!(
                "more than {} subscribed partitions",
                u32::MAX
            )));
        }
    }
    Ok((topics, view_index))
}

#[cfg(test)]
mod tests;
