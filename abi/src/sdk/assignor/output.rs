//! Building the [`Assignment`] from a policy's owner table.

use abi_stable::std_types::{RString, RVec};

use super::GroupView;
use crate::{Assignment, MemberAssignment, PluginError, TopicPartitions};

impl GroupView<'_> {
    /// Builds the assignment from `owners`, which gives for every global partition id
    /// (`0..partition_count()`) the index of the member it goes to. Members come out
    /// sorted by id (every member, possibly with no partitions), each member's topics
    /// sorted by name and each topic's partitions ascending.
    ///
    /// Errors ([`crate::ErrorKind::Internal`]): `owners` has the wrong length or
    /// names no valid member for some partition — a bug in the policy.
    pub fn build(&self, owners: &[u32]) -> Result<Assignment, PluginError> {
        if owners.len() != self.partition_count() {
            return Err(PluginError::internal(format!(
                "owner table has {} entries for {} partitions",
                owners.len(),
                self.partition_count()
            )));
        }
        let by_member = self.group_by_member(owners)?;
        let members = self
            .members()
            .iter()
            .enumerate()
            .map(|(m, member)| MemberAssignment {
                member_id: RString::from(member.id),
                partitions: self.topic_partitions(by_member.of(m)),
            })
            .collect();
        Ok(Assignment { members })
    }

    /// Builds a share group's assignment (assignor ABI 3.3) from `holders`, which gives
    /// for every global partition id (`0..partition_count()`) the indices of the
    /// members it goes to (at least one; a member named twice counts once). The output
    /// is sorted as [`build`](Self::build)'s.
    ///
    /// Errors ([`crate::ErrorKind::Internal`]): `holders` has the wrong length, a
    /// partition has no holder, or an index names no member — a bug in the policy.
    pub fn build_share(&self, holders: &[Vec<u32>]) -> Result<Assignment, PluginError> {
        if holders.len() != self.partition_count() {
            return Err(PluginError::internal(format!(
                "holder table has {} entries for {} partitions",
                holders.len(),
                self.partition_count()
            )));
        }
        let count = self.members().len();
        let mut by_member: Vec<Vec<u32>> = vec![Vec::new(); count];
        for (g, of) in holders.iter().enumerate() {
            let topic = &self.topics()[self.topic_of(g as u32)];
            if of.is_empty() {
                return Err(PluginError::internal(format!(
                    "partition {} of topic `{}` left unassigned",
                    g as u32 - topic.first,
                    topic.name
                )));
            }
            for &m in of {
                let Some(list) = by_member.get_mut(m as usize) else {
                    return Err(PluginError::internal(format!(
                        "partition {} of topic `{}` given to member index {m} of {count}",
                        g as u32 - topic.first,
                        topic.name
                    )));
                };
                // Ascending by construction; a repeat is the last entry.
                if list.last() != Some(&(g as u32)) {
                    list.push(g as u32);
                }
            }
        }
        let members = self
            .members()
            .iter()
            .zip(&by_member)
            .map(|(member, ids)| MemberAssignment {
                member_id: RString::from(member.id),
                partitions: self.topic_partitions(ids),
            })
            .collect();
        Ok(Assignment { members })
    }

    /// Counting sort of the global ids by owner; each member's ids stay ascending.
    fn group_by_member(&self, owners: &[u32]) -> Result<ByMember, PluginError> {
        let count = self.members().len();
        let mut start = vec![0usize; count + 1];
        for (g, &owner) in owners.iter().enumerate() {
            if owner as usize >= count {
                return Err(PluginError::internal(format!(
                    "partition {} of topic `{}` left unassigned",
                    g as u32 - self.topics()[self.topic_of(g as u32)].first,
                    self.topics()[self.topic_of(g as u32)].name
                )));
            }
            start[owner as usize + 1] += 1;
        }
        for m in 0..count {
            start[m + 1] += start[m];
        }
        let mut next = start.clone();
        let mut ids = vec![0u32; owners.len()];
        for (g, &owner) in owners.iter().enumerate() {
            ids[next[owner as usize]] = g as u32;
            next[owner as usize] += 1;
        }
        Ok(ByMember { start, ids })
    }

    /// Splits ascending global ids into per-topic runs.
    fn topic_partitions(&self, mut ids: &[u32]) -> RVec<TopicPartitions> {
        let mut out = Vec::new();
        while let Some(&g) = ids.first() {
            let topic = &self.topics()[self.topic_of(g)];
            let end = topic.first + topic.partitions;
            let len = ids.partition_point(|&id| id < end);
            let partitions: RVec<i32> = ids[..len]
                .iter()
                .map(|&id| (id - topic.first) as i32)
                .collect();
            out.push(TopicPartitions {
                topic: RString::from(topic.name),
                partitions,
            });
            ids = &ids[len..];
        }
        RVec::from(out)
    }
}

/// Global ids grouped by member: member `m`'s are `ids[start[m]..start[m + 1]]`.
struct ByMember {
    start: Vec<usize>,
    ids: Vec<u32>,
}

impl ByMember {
    fn of(&self, member: usize) -> &[u32] {
        &self.ids[self.start[member]..self.start[member + 1]]
    }
}

#[cfg(test)]
mod tests;
