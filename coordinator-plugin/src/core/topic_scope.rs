//! Topic scopes (KAFKA-18813): with an authorizer, a regex or pattern subscription
//! matches only the topics the member's principal may Describe.
//!
//! The host knows principals; the coordinator does not. So the host sends each
//! connection's *scope* (`Input::TopicScope`: the topics its principal may describe)
//! when the connection attaches, before its first frame, and again whenever the core
//! asks (`Output::WantTopicScope`): when the scope of a connection a pattern member
//! uses is older than `regex_refresh_interval_ms` (config) (ACLs may have changed; a timer in the one timer
//! table, `TimerKey::TopicScope`), and after every topic change (a new topic the
//! principal may describe must be matched). Without an authorizer no scope ever
//! arrives and nothing is restricted.
//!
//! Each member keeps the scope of the connection it last spoke on (KIP-848: its latest
//! heartbeat; native: its channel), so a member whose connection closed keeps its last
//! scope rather than falling back to no restriction. This is stricter than Kafka, which
//! resolves a group's regex once with the principal of the member that triggered the
//! resolution and shares the result.
//!
//! Bounded: one entry per open connection the host sent a scope for (the host caps
//! connections); each entry is one set of topic names.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::io::Output;
use crate::subscription::{Resolver, SubscriptionSpec};
use crate::types::{ConnId, GroupId, TopicName};

use super::{Coordinator, Ctx, TimerKey};

/// The topics a connection's principal may describe, shared by the members using it.
pub(crate) type Scope = Arc<BTreeSet<TopicName>>;

/// One connection's scope.
#[derive(Debug)]
struct Entry {
    topics: Scope,
    /// Whether a member with a pattern subscription spoke on the connection: only then
    /// is the scope refreshed.
    pattern_use: bool,
}

/// Every connection's scope, by connection.
#[derive(Debug, Default)]
pub(crate) struct TopicScopes {
    by_conn: HashMap<ConnId, Entry>,
}

impl TopicScopes {
    /// `conn`'s scope, if the host sent one.
    pub(crate) fn get(&self, conn: ConnId) -> Option<&Scope> {
        self.by_conn.get(&conn).map(|e| &e.topics)
    }

    /// Stores `conn`'s scope; returns the new scope when it differs from the one held.
    pub(crate) fn set(&mut self, conn: ConnId, topics: BTreeSet<TopicName>) -> Option<Scope> {
        match self.by_conn.get_mut(&conn) {
            Some(e) if *e.topics == topics => None,
            Some(e) => {
                e.topics = Arc::new(topics);
                Some(Arc::clone(&e.topics))
            }
            None => {
                let topics = Arc::new(topics);
                self.by_conn.insert(
                    conn,
                    Entry {
                        topics: Arc::clone(&topics),
                        pattern_use: false,
                    },
                );
                Some(topics)
            }
        }
    }

    /// Notes that a member with a pattern subscription spoke on `conn`; `true` the
    /// first time (the caller starts the refresh timer). `false` without a scope.
    pub(crate) fn note_pattern_use(&mut self, conn: ConnId) -> bool {
        match self.by_conn.get_mut(&conn) {
            Some(e) if !e.pattern_use => {
                e.pattern_use = true;
                true
            }
            _ => false,
        }
    }

    /// Whether a pattern member spoke on `conn` (its scope is refreshed).
    pub(crate) fn pattern_use(&self, conn: ConnId) -> bool {
        self.by_conn.get(&conn).is_some_and(|e| e.pattern_use)
    }

    /// The connections whose scope is refreshed, in id order.
    pub(crate) fn pattern_conns(&self) -> Vec<ConnId> {
        let mut out: Vec<ConnId> = self
            .by_conn
            .iter()
            .filter(|(_, e)| e.pattern_use)
            .map(|(c, _)| *c)
            .collect();
        out.sort_unstable();
        out
    }

    /// Forgets `conn` (it closed).
    pub(crate) fn remove(&mut self, conn: ConnId) {
        if self.by_conn.remove(&conn).is_some() {
            crate::shrink::map(&mut self.by_conn);
        }
    }
}

/// `matches` (a pattern's matches) restricted to `scope`; all of them without a scope.
pub(crate) fn restrict<'a>(
    matches: impl IntoIterator<Item = &'a TopicName>,
    scope: Option<&Scope>,
) -> impl Iterator<Item = &'a TopicName> {
    let scope = scope.cloned();
    matches
        .into_iter()
        .filter(move |t| scope.as_ref().is_none_or(|s| s.contains(*t)))
}

/// A native member's resolved subscription `resolved` restricted to its connection's
/// `scope` when it is a pattern; a static subscription is not (the host checks Read on
/// each of its topics).
pub(crate) fn scoped(
    resolved: Arc<BTreeSet<TopicName>>,
    spec: &SubscriptionSpec,
    scope: Option<&Scope>,
) -> Arc<BTreeSet<TopicName>> {
    if !spec.is_wildcard() || scope.is_none() {
        return resolved;
    }
    Arc::new(restrict(resolved.iter(), scope).cloned().collect())
}

impl Ctx {
    /// How long a connection's scope serves a pattern member before the core asks the
    /// host for a fresh one, ms (`CoordinatorConfig::regex_refresh_interval_ms`).
    fn refresh_ms(&self) -> u64 {
        u64::from(self.config.regex_refresh_interval_ms)
    }

    /// A member with a pattern subscription spoke on `conn`: its scope is refreshed
    /// every `regex_refresh_interval_ms` from now on (no-op without a scope).
    pub(super) fn note_pattern_use(&mut self, conn: ConnId) {
        if self.scopes.note_pattern_use(conn) {
            let at = self.now.saturating_add(self.refresh_ms());
            self.timers.set(TimerKey::TopicScope(conn), Some(at));
        }
    }
}

impl Coordinator {
    /// [`crate::Input::TopicScope`]: stores `conn`'s scope, restarts its refresh timer
    /// when a pattern member uses it, and when it changed, re-resolves the pattern
    /// subscriptions of the members on `conn`.
    pub(super) fn on_topic_scope(&mut self, conn: ConnId, topics: BTreeSet<TopicName>) {
        let changed = self.cx.scopes.set(conn, topics);
        if self.cx.scopes.pattern_use(conn) {
            let at = self.cx.now.saturating_add(self.cx.refresh_ms());
            self.cx.timers.set(TimerKey::TopicScope(conn), Some(at));
        }
        if let Some(scope) = changed {
            self.consumer_scope_changed(conn, &scope);
            self.native_scope_changed(conn, &scope);
        }
    }

    /// The scope of `conn` changed: the native member whose channel it is re-resolves
    /// its pattern, and its group rebalances when its topics moved.
    fn native_scope_changed(&mut self, conn: ConnId, scope: &Scope) {
        let cx = &mut self.cx;
        let mut resolver = Resolver::new(&cx.topics, cx.config.exclude_internal_topics);
        let mut changed: Vec<GroupId> = Vec::new();
        for g in self.groups.natives_mut() {
            for m in g.members.values_mut_unordered() {
                if m.conn != conn || !m.subscription.is_wildcard() {
                    continue;
                }
                let resolved = scoped(
                    resolver.resolve(&m.subscription),
                    &m.subscription,
                    Some(scope),
                );
                if *resolved != *m.topics {
                    m.topics = resolved;
                    changed.push(g.id.clone());
                }
            }
        }
        for id in changed {
            if let Some(g) = self.groups.native_mut(&id) {
                self.cx.native(g, |g, env, fx| {
                    g.trigger(env, fx, "a consumer's topic scope changed");
                    g.progress(env, fx);
                });
            }
        }
    }

    /// `conn`'s refresh timer fired: asks the host for its scope again (the answer
    /// restarts the timer).
    pub(super) fn topic_scope_due(&mut self, conn: ConnId) {
        if self.cx.scopes.pattern_use(conn) {
            self.cx.output(Output::WantTopicScope { conn });
        }
    }

    /// The topics changed: asks for the scope of every connection a pattern member
    /// uses, so that a new topic its principal may describe is matched.
    pub(super) fn refresh_topic_scopes(&mut self) {
        for conn in self.cx.scopes.pattern_conns() {
            self.cx.output(Output::WantTopicScope { conn });
        }
    }

    /// `conn` closed: its scope and timer go (its members keep their last scope).
    pub(super) fn forget_topic_scope(&mut self, conn: ConnId) {
        self.cx.scopes.remove(conn);
        self.cx.timers.set(TimerKey::TopicScope(conn), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(ns: &[&str]) -> BTreeSet<TopicName> {
        ns.iter().copied().map(TopicName::new).collect()
    }

    #[test]
    fn a_scope_restricts_and_none_does_not() {
        let all = names(&["a1", "a2", "b"]);
        let scope: Scope = Arc::new(names(&["a1", "b"]));
        let kept: Vec<&str> = restrict(&all, Some(&scope)).map(|t| t.as_str()).collect();
        assert_eq!(kept, ["a1", "b"]);
        assert_eq!(restrict(&all, None).count(), 3);
    }

    #[test]
    fn set_reports_only_changes_and_pattern_use_is_noted_once() {
        let mut s = TopicScopes::default();
        assert!(s.set(ConnId(1), names(&["a"])).is_some());
        assert!(s.set(ConnId(1), names(&["a"])).is_none());
        assert!(s.set(ConnId(1), names(&["a", "b"])).is_some());
        assert!(
            !s.note_pattern_use(ConnId(2)),
            "no scope, nothing to refresh"
        );
        assert!(s.note_pattern_use(ConnId(1)));
        assert!(!s.note_pattern_use(ConnId(1)));
        assert_eq!(s.pattern_conns(), [ConnId(1)]);
        s.remove(ConnId(1));
        assert!(s.get(ConnId(1)).is_none());
    }
}
