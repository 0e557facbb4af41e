//! The decision engine: an immutable index of a set of ACL bindings, answering
//! [`Index::authorize`] and [`Index::authorize_any`] with Kafka's StandardAuthorizer
//! semantics in time that does not grow with the number of ACLs.
//!
//! Per resource type:
//! - literal patterns by name in a hash map (the wildcard `*` is the entry of name `*`);
//! - prefixed patterns in a vector sorted by prefix, each with the index of its longest
//!   proper prefix that is also a pattern (its parent). The patterns that are prefixes
//!   of a name are the greatest pattern not above the name and its ancestors (any
//!   pattern that is a prefix of the name sorts between itself and the name, so it is a
//!   prefix of that greatest one): one binary search and a walk up a chain;
//! - every pattern's entries grouped by principal, so that a resource with thousands of
//!   principals costs a lookup of the principal and of `User:*`;
//! - for [`Index::authorize_any`], every entry of the type grouped by principal.

use std::{
    collections::{HashMap, HashSet},
    net::IpAddr,
};

use drover_abi::authorizer::{
    AclBinding, AclOperation, AclPermission, PatternType, ResourceType, WILDCARD,
};

use crate::acl::SUPPORTED_TYPES;

/// The principal every principal matches (Kafka's wildcard principal).
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// The resource name [`Index::authorize_any`] first asks about, as Kafka's
/// `authorizeByResourceType` does (so that super users and resources without ACLs are
/// decided as by `authorize`).
const PROBE_RESOURCE: &str = "hardcode";

/// Who asks: a principal (`User:alice`) from a client address.
#[derive(Debug, Clone, Copy)]
pub struct Who<'a> {
    /// `Type:name`.
    pub principal: &'a str,
    /// The client's IP address as text.
    pub host: &'a str,
}

/// The settings decisions depend on besides the ACLs.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Principals allowed everything.
    pub super_users: HashSet<String>,
    /// Allow what no ACL of the resource speaks about.
    pub allow_everyone_if_no_acl_found: bool,
}

#[derive(Debug, Clone)]
struct Ace {
    host: String,
    operation: AclOperation,
    permission: AclPermission,
}

/// The entries of one resource pattern, by principal.
#[derive(Debug, Default)]
struct Aces {
    by_principal: HashMap<String, Vec<Ace>>,
}

/// What the entries of the matching patterns say about one action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// No entry applies.
    None,
    /// An ALLOW applies and no DENY.
    Allow,
    /// A DENY applies.
    Deny,
}

impl Aces {
    fn check(&self, principal: &str, host: &str, operation: AclOperation) -> Verdict {
        let mut verdict = Verdict::None;
        let wildcard = (principal != WILDCARD_PRINCIPAL).then_some(WILDCARD_PRINCIPAL);
        for p in std::iter::once(principal).chain(wildcard) {
            for ace in self.by_principal.get(p).into_iter().flatten() {
                if !host_matches(&ace.host, host) || !operation_matches(ace, operation) {
                    continue;
                }
                if ace.permission == AclPermission::Deny {
                    return Verdict::Deny;
                }
                verdict = Verdict::Allow;
            }
        }
        verdict
    }
}

/// Whether an entry for `acl_host` applies to a client at `client`: `*`, the same text,
/// or the same IP address written differently (`::1` and `0:0:0:0:0:0:0:1`).
pub fn host_matches(acl_host: &str, client: &str) -> bool {
    if acl_host == WILDCARD || acl_host == client {
        return true;
    }
    match (acl_host.parse::<IpAddr>(), client.parse::<IpAddr>()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Whether an entry's operation covers `operation`: ALL covers everything; an ALLOW of
/// READ, WRITE, DELETE or ALTER covers DESCRIBE and an ALLOW of ALTER_CONFIGS covers
/// DESCRIBE_CONFIGS (a DENY covers only its own operation, as in Kafka: DENY READ does
/// not deny DESCRIBE).
fn operation_matches(ace: &Ace, operation: AclOperation) -> bool {
    ace.operation == AclOperation::All
        || ace.operation == operation
        || (ace.permission == AclPermission::Allow && implies(ace.operation, operation))
}

/// Whether an ALLOW of `granted` also allows `wanted` (other than equality and ALL).
pub fn implies(granted: AclOperation, wanted: AclOperation) -> bool {
    match wanted {
        AclOperation::Describe => matches!(
            granted,
            AclOperation::Read | AclOperation::Write | AclOperation::Delete | AclOperation::Alter
        ),
        AclOperation::DescribeConfigs => granted == AclOperation::AlterConfigs,
        _ => false,
    }
}

#[derive(Debug)]
struct Prefix {
    prefix: String,
    aces: Aces,
    parent: Option<usize>,
}

/// One entry of a type, for [`Index::authorize_any`].
#[derive(Debug)]
struct TypeEntry {
    pattern_type: PatternType,
    name: String,
    ace: Ace,
}

#[derive(Debug, Default)]
struct TypeIndex {
    literal: HashMap<String, Aces>,
    prefixed: Vec<Prefix>,
    by_principal: HashMap<String, Vec<TypeEntry>>,
}

impl TypeIndex {
    /// Calls `f` with the entries of every pattern matching resource `name`; stops when
    /// `f` returns false.
    fn for_each_match(&self, name: &str, mut f: impl FnMut(&Aces) -> bool) {
        if let Some(aces) = self.literal.get(name) {
            if !f(aces) {
                return;
            }
        }
        if name != WILDCARD {
            if let Some(aces) = self.literal.get(WILDCARD) {
                if !f(aces) {
                    return;
                }
            }
        }
        let floor = self.prefixed.partition_point(|p| p.prefix.as_str() <= name);
        let mut next = floor.checked_sub(1);
        while let Some(i) = next {
            let p = &self.prefixed[i];
            if name.starts_with(p.prefix.as_str()) && !f(&p.aces) {
                return;
            }
            next = p.parent;
        }
    }
}

/// An immutable index of a set of bindings.
#[derive(Debug, Default)]
pub struct Index {
    types: [TypeIndex; 4],
}

fn type_slot(t: ResourceType) -> Option<usize> {
    SUPPORTED_TYPES.iter().position(|s| *s == t)
}

/// Whether an action's operation is one a request may ask about.
fn is_action_operation(op: AclOperation) -> bool {
    crate::acl::is_binding_operation(op)
}

/// Whether an action's resource type is a concrete, known type.
fn is_action_type(t: ResourceType) -> bool {
    t.name().is_some() && t != ResourceType::Any && t != ResourceType::Unknown
}

impl Index {
    /// Indexes `acls` (valid bindings of supported types; others are ignored).
    pub fn build<'a>(acls: impl IntoIterator<Item = &'a AclBinding>) -> Index {
        let mut index = Index::default();
        let mut prefixed: [Vec<(String, Aces)>; 4] = Default::default();
        let mut last_prefix: [Option<String>; 4] = Default::default();
        // Bindings come sorted by pattern (type, name, pattern type): the prefixed
        // patterns of a type arrive in name order, each pattern's entries together.
        let mut sorted: Vec<&AclBinding> = acls.into_iter().collect();
        sorted.sort_unstable_by(|a, b| a.pattern.cmp(&b.pattern));
        for b in sorted {
            let Some(slot) = type_slot(b.pattern.resource_type) else {
                continue;
            };
            let t = &mut index.types[slot];
            let ace = Ace {
                host: b.entry.host.to_string(),
                operation: b.entry.operation,
                permission: b.entry.permission,
            };
            let principal = b.entry.principal.to_string();
            t.by_principal
                .entry(principal.clone())
                .or_default()
                .push(TypeEntry {
                    pattern_type: b.pattern.pattern_type,
                    name: b.pattern.name.to_string(),
                    ace: ace.clone(),
                });
            let aces = match b.pattern.pattern_type {
                PatternType::Literal => t.literal.entry(b.pattern.name.to_string()).or_default(),
                PatternType::Prefixed => {
                    let list = &mut prefixed[slot];
                    if last_prefix[slot].as_deref() != Some(b.pattern.name.as_str()) {
                        last_prefix[slot] = Some(b.pattern.name.to_string());
                        list.push((b.pattern.name.to_string(), Aces::default()));
                    }
                    &mut list.last_mut().expect("pushed").1
                }
                _ => continue,
            };
            aces.by_principal.entry(principal).or_default().push(ace);
        }
        for (slot, list) in prefixed.into_iter().enumerate() {
            let mut out: Vec<Prefix> = Vec::with_capacity(list.len());
            let mut stack: Vec<usize> = Vec::new();
            // Sorted by bytes (str order), the patterns come in depth-first order of
            // their prefix tree: a pattern's parent is the nearest one on the stack that
            // is a prefix of it.
            let mut list = list;
            list.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            for (prefix, aces) in list {
                while let Some(&top) = stack.last() {
                    if prefix.starts_with(out[top].prefix.as_str()) {
                        break;
                    }
                    stack.pop();
                }
                let parent = stack.last().copied();
                stack.push(out.len());
                out.push(Prefix {
                    prefix,
                    aces,
                    parent,
                });
            }
            index.types[slot].prefixed = out;
        }
        index
    }

    /// Whether `principal` at `host` may do `operation` on literal resource `name` of
    /// `resource_type`, as Kafka's StandardAuthorizer decides: super users yes; a code
    /// this build does not know, a pattern type other than LITERAL, or a resource type
    /// this authorizer does not keep ACLs for, no; else a matching DENY denies, a
    /// matching ALLOW allows, and without either the action is allowed only if no ACL at
    /// all names the resource and `allow_everyone_if_no_acl_found` is set.
    pub fn authorize(
        &self,
        policy: &Policy,
        who: Who<'_>,
        resource_type: ResourceType,
        pattern_type: PatternType,
        name: &str,
        operation: AclOperation,
    ) -> bool {
        let Who { principal, host } = who;
        if !is_action_operation(operation)
            || !is_action_type(resource_type)
            || pattern_type != PatternType::Literal
        {
            return false;
        }
        if policy.super_users.contains(principal) {
            return true;
        }
        let Some(slot) = type_slot(resource_type) else {
            return false;
        };
        let mut found = false;
        let mut verdict = Verdict::None;
        self.types[slot].for_each_match(name, |aces| {
            found = true;
            match aces.check(principal, host, operation) {
                Verdict::Deny => {
                    verdict = Verdict::Deny;
                    false
                }
                Verdict::Allow => {
                    verdict = Verdict::Allow;
                    true
                }
                Verdict::None => true,
            }
        });
        match verdict {
            Verdict::Deny => false,
            Verdict::Allow => true,
            Verdict::None => !found && policy.allow_everyone_if_no_acl_found,
        }
    }

    /// Whether `principal` at `host` may do `operation` on at least one resource of
    /// `resource_type` (Kafka's `authorizeByResourceType`, KIP-679): allowed if
    /// [`Index::authorize`] allows it on an arbitrary name (super users; no ACLs with
    /// `allow_everyone_if_no_acl_found`); else, over the entries of the principal and of
    /// `User:*` from that host with exactly that operation or ALL (no implications): a
    /// DENY on the literal `*` denies; an ALLOW on the literal `*` allows; an ALLOW on a
    /// literal name or prefix allows unless a DENY on the same literal name, or a DENY on
    /// a prefix of it, covers it.
    pub fn authorize_any(
        &self,
        policy: &Policy,
        who: Who<'_>,
        resource_type: ResourceType,
        operation: AclOperation,
    ) -> bool {
        let Who { principal, host } = who;
        if !is_action_operation(operation) || !is_action_type(resource_type) {
            return false;
        }
        if self.authorize(
            policy,
            who,
            resource_type,
            PatternType::Literal,
            PROBE_RESOURCE,
            operation,
        ) {
            return true;
        }
        let Some(slot) = type_slot(resource_type) else {
            return false;
        };
        let t = &self.types[slot];
        let wildcard = (principal != WILDCARD_PRINCIPAL).then_some(WILDCARD_PRINCIPAL);
        let mut deny_literal: HashSet<&str> = HashSet::new();
        let mut deny_prefixed: HashSet<&str> = HashSet::new();
        let mut allows: Vec<(PatternType, &str)> = Vec::new();
        for p in std::iter::once(principal).chain(wildcard) {
            for e in t.by_principal.get(p).into_iter().flatten() {
                if !host_matches(&e.ace.host, host)
                    || (e.ace.operation != operation && e.ace.operation != AclOperation::All)
                {
                    continue;
                }
                let literal = e.pattern_type == PatternType::Literal;
                match (e.ace.permission, literal, e.name == WILDCARD) {
                    (AclPermission::Deny, true, true) => return false,
                    (AclPermission::Deny, true, false) => {
                        deny_literal.insert(&e.name);
                    }
                    (AclPermission::Deny, false, _) => {
                        deny_prefixed.insert(&e.name);
                    }
                    (_, true, true) => return true,
                    (_, _, _) => allows.push((e.pattern_type, &e.name)),
                }
            }
        }
        allows.into_iter().any(|(pattern_type, name)| {
            if pattern_type == PatternType::Literal && deny_literal.contains(name) {
                return false;
            }
            !name
                .char_indices()
                .map(|(i, c)| &name[..i + c.len_utf8()])
                .any(|prefix| deny_prefixed.contains(prefix))
        })
    }
}
