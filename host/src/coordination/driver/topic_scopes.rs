//! Topic scopes for the coordinator (coordinator ABI 3.9, KAFKA-18813): the topics
//! each connection's principal may Describe, so that a regex or pattern subscription
//! matches only those (docs/security.md, "Group APIs").
//!
//! With an authorizer, a connection's authorization context comes with its attach
//! ([`super::Msg::Attach`]); the driver keeps it while the connection is attached (one
//! entry per attached connection: bounded by the connection cap) and answers with one
//! batched authorize call over every topic: when the connection attaches, before its
//! first frame, and for each `WantTopicScope` the coordinator emits (its refresh
//! timer, topic changes). Without an authorizer, or for a coordinator before 3.9,
//! nothing is kept or sent.

use std::collections::HashMap;

use abi_stable::std_types::{RString, RVec};
use drover_abi::coordinator::CoordinatorInput;

use crate::{
    authz::{AclOperation, Allowed, RequestAuthz, ResourceType},
    server::conn_id::ConnId,
};

/// The coordinator ABI minor (of major 3) that added `CoordinatorInput::TopicScope`
/// and `CoordinatorOutput::WantTopicScope`.
pub(crate) const TOPIC_SCOPE_MINOR: u32 = 9;

/// The authorization context of each attached connection that has one.
#[derive(Default)]
pub(super) struct TopicScopes {
    by_conn: HashMap<ConnId, RequestAuthz>,
}

impl TopicScopes {
    /// Keeps `authz` for `conn` when it decides anything (an authorizer is configured).
    /// Returns whether it was kept.
    pub(super) fn attach(&mut self, conn: ConnId, authz: RequestAuthz) -> bool {
        if !authz.is_enabled() {
            return false;
        }
        self.by_conn.insert(conn, authz);
        true
    }

    /// Forgets `conn` (it closed).
    pub(super) fn remove(&mut self, conn: ConnId) {
        self.by_conn.remove(&conn);
    }

    /// `conn`'s scope among `topics` as the input that carries it: the topics its
    /// principal may Describe (one authorize call, not logged: an implicit filter, as
    /// Kafka's regex resolution is). `None` for a connection without a context.
    pub(super) fn input<'t>(
        &self,
        conn: ConnId,
        topics: impl IntoIterator<Item = &'t str>,
    ) -> Option<CoordinatorInput> {
        let authz = self.by_conn.get(&conn)?;
        let topics: Vec<&str> = topics.into_iter().collect();
        let allowed = authz.allowed_names_quietly(
            ResourceType::Topic,
            AclOperation::Describe,
            topics.iter().copied(),
        );
        let scope: RVec<RString> = topics
            .into_iter()
            .filter(|t| allowed.contains(t))
            .map(RString::from)
            .collect();
        debug_assert!(
            !matches!(allowed, Allowed::All),
            "only kept with an authorizer"
        );
        Some(CoordinatorInput::TopicScope {
            conn,
            topics: scope,
        })
    }
}
