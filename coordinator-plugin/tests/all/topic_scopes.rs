//! Topic scopes (coordinator ABI 3.9, KAFKA-18813): with an authorizer the host sends
//! each connection's describable topics, and a regex subscription of a KIP-848 member
//! matches only those — refreshed after topic changes and on the refresh timer. The
//! harness plays the host: a connection's principal may describe topics by prefix.

use drover_coordinator::{CoordinatorConfig, Input};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use uuid::Uuid;

use crate::kafka::{s, Harness, AUDIT_ID, ORDERS_ID, PAYMENTS_ID};

fn join_regex(group: &str, member: &str, regex: &str) -> ConsumerGroupHeartbeatRequest {
    let mut r = ConsumerGroupHeartbeatRequest::default();
    r.group_id = s(group).into();
    r.member_id = s(member);
    r.member_epoch = 0;
    r.rebalance_timeout_ms = 5_000;
    r.subscribed_topic_regex = Some(s(regex));
    r.topic_partitions = Some(Vec::new());
    r
}

/// A full heartbeat at `epoch` owning nothing of note (the member acknowledges what it
/// was given by reporting `owned`).
fn beat(
    group: &str,
    member: &str,
    epoch: i32,
    owned: &[(Uuid, Vec<i32>)],
) -> ConsumerGroupHeartbeatRequest {
    let mut r = ConsumerGroupHeartbeatRequest::default();
    r.group_id = s(group).into();
    r.member_id = s(member);
    r.member_epoch = epoch;
    r.rebalance_timeout_ms = -1;
    r.topic_partitions = Some(
        owned
            .iter()
            .map(|(id, ps)| {
                let mut t = kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions::default();
                t.topic_id = *id;
                t.partitions = ps.clone();
                t
            })
            .collect(),
    );
    r
}

/// The topics (by id) of an answer's assignment; `None` when absent.
fn assigned(r: &ConsumerGroupHeartbeatResponse) -> Option<Vec<(Uuid, Vec<i32>)>> {
    r.assignment.as_ref().map(|a| {
        let mut out: Vec<(Uuid, Vec<i32>)> = a
            .topic_partitions
            .iter()
            .map(|t| {
                let mut ps = t.partitions.clone();
                ps.sort();
                (t.topic_id, ps)
            })
            .collect();
        out.sort();
        out
    })
}

/// One member's view: heartbeats until its assignment stops changing, reporting what
/// it holds, and returns the topic ids it holds.
struct Member {
    conn: drover_coordinator::ConnId,
    group: &'static str,
    id: &'static str,
    epoch: i32,
    owned: Vec<(Uuid, Vec<i32>)>,
}

impl Member {
    fn join(
        h: &mut Harness,
        conn: drover_coordinator::ConnId,
        group: &'static str,
        id: &'static str,
        regex: &str,
    ) -> Member {
        let r = h.call(conn, 1, join_regex(group, id, regex));
        assert_eq!(r.error_code, 0, "{r:?}");
        let mut m = Member {
            conn,
            group,
            id,
            epoch: r.member_epoch,
            owned: Vec::new(),
        };
        if let Some(a) = assigned(&r) {
            m.owned = a;
        }
        m
    }

    /// Heartbeats (1 s apart) until the answer carries no new assignment; the topics
    /// held then.
    fn settle(&mut self, h: &mut Harness) -> Vec<Uuid> {
        for _ in 0..10 {
            h.advance(1_000);
            let r = h.call(
                self.conn,
                1,
                beat(self.group, self.id, self.epoch, &self.owned),
            );
            assert_eq!(r.error_code, 0, "{r:?}");
            self.epoch = r.member_epoch;
            match assigned(&r) {
                Some(a) if a != self.owned => self.owned = a,
                _ => break,
            }
        }
        self.owned
            .iter()
            .filter(|(_, ps)| !ps.is_empty())
            .map(|(t, _)| *t)
            .collect()
    }
}

fn ids(raw: &[[u8; 16]]) -> Vec<Uuid> {
    let mut out: Vec<Uuid> = raw.iter().map(|b| Uuid::from_bytes(*b)).collect();
    out.sort();
    out
}

/// A regex member whose principal may describe only `orders` and `audit` is assigned
/// only those, while a member of another group on a connection without a scope (no
/// authorizer) gets every match.
#[test]
fn a_regex_matches_only_topics_the_connections_principal_may_describe() {
    let mut h = Harness::new();
    let scoped = h.connect_as(&["orders", "audit"]);
    let open = h.connect();
    let mut a = Member::join(&mut h, scoped, "scoped", "member-a-0000000000001", ".*");
    let mut b = Member::join(&mut h, open, "open", "member-b-0000000000001", ".*");
    assert_eq!(a.settle(&mut h), ids(&[ORDERS_ID, AUDIT_ID]));
    assert_eq!(b.settle(&mut h), ids(&[ORDERS_ID, PAYMENTS_ID, AUDIT_ID]));
    assert!(h.scope_requests.is_empty(), "nothing to refresh yet");
}

/// A topic created later that the principal may describe is matched (the coordinator
/// asks the host for the scope again after the topic change); one it may not describe
/// is not.
#[test]
fn a_new_topic_the_principal_may_describe_is_picked_up() {
    let mut h = Harness::new();
    let conn = h.connect_as(&["orders"]);
    let mut a = Member::join(
        &mut h,
        conn,
        "g",
        "member-a-0000000000001",
        "orders.*|secret.*",
    );
    assert_eq!(a.settle(&mut h), ids(&[ORDERS_ID]));
    h.set_topics(&[
        ("orders", 6),
        ("payments", 3),
        ("audit", 2),
        ("orders-eu", 2),
        ("secret-x", 1),
    ]);
    assert_eq!(
        h.scope_requests,
        [conn],
        "asked again after the topic change"
    );
    let held = a.settle(&mut h);
    // set_topics numbers ids by position: orders-eu is the fourth.
    assert_eq!(held, ids(&[ORDERS_ID, [4; 16]]));
}

/// The scope is refreshed on the coordinator's timer (`regex_refresh_interval_ms`,
/// 60 s by default): a Describe ACL revoked meanwhile takes the topic away from the
/// member at the next refresh.
#[test]
fn a_revoked_describe_takes_the_topic_away_at_the_next_refresh() {
    let mut h = Harness::new();
    let conn = h.connect_as(&["orders", "audit"]);
    let mut a = Member::join(&mut h, conn, "g", "member-a-0000000000001", ".*");
    assert_eq!(a.settle(&mut h), ids(&[ORDERS_ID, AUDIT_ID]));
    h.principals.insert(conn, vec!["orders".into()]);
    // Keep the member alive past the refresh interval (60 s).
    for _ in 0..65 {
        a.settle(&mut h);
    }
    assert!(h.scope_requests.contains(&conn), "refreshed on the timer");
    assert_eq!(a.settle(&mut h), ids(&[ORDERS_ID]));
}

/// `regex_refresh_interval_ms` sets the refresh: at 5 s, the revoked topic is gone
/// after a few seconds of heartbeats, long before the default 60 s.
#[test]
fn the_refresh_interval_is_the_configured_one() {
    let mut h = Harness::with_config(CoordinatorConfig {
        regex_refresh_interval_ms: 5_000,
        ..crate::kafka::config()
    });
    let conn = h.connect_as(&["orders", "audit"]);
    let mut a = Member::join(&mut h, conn, "g", "member-a-0000000000001", ".*");
    assert_eq!(a.settle(&mut h), ids(&[ORDERS_ID, AUDIT_ID]));
    h.principals.insert(conn, vec!["orders".into()]);
    h.scope_requests.clear();
    for _ in 0..8 {
        a.settle(&mut h);
    }
    assert!(
        h.scope_requests.contains(&conn),
        "refreshed on the 5 s timer"
    );
    assert_eq!(a.settle(&mut h), ids(&[ORDERS_ID]));
}

/// A connection that closes takes its scope along, but its member keeps the last scope
/// it had (it is never resolved unscoped); the scope of a closed connection is never
/// asked for.
#[test]
fn a_member_keeps_its_scope_after_its_connection_closes() {
    let mut h = Harness::new();
    let conn = h.connect_as(&["orders"]);
    let mut a = Member::join(&mut h, conn, "g", "member-a-0000000000001", ".*");
    assert_eq!(a.settle(&mut h), ids(&[ORDERS_ID]));
    h.close(conn);
    h.set_topics(&[("orders", 6), ("payments", 3), ("audit", 2), ("other", 1)]);
    assert!(h.scope_requests.is_empty());
    // The member comes back on a connection of the same principal.
    let again = h.connect_as(&["orders"]);
    a.conn = again;
    assert_eq!(a.settle(&mut h), ids(&[ORDERS_ID]));
    // A scope input for a connection nobody uses changes nothing.
    h.feed(Input::TopicScope {
        conn: drover_coordinator::ConnId(999),
        topics: Default::default(),
    });
    assert_eq!(a.settle(&mut h), ids(&[ORDERS_ID]));
}
