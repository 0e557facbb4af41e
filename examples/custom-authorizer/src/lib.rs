//! `policy-file`: an example Drover authorizer, written against `drover-abi` only. Its
//! config names a policy file (`policy = "/etc/drover/policy"`), one rule a line:
//!
//! ```text
//! super  User:admin                      # allowed everything
//! label  topic  orders-*   sales         # resources get labels by type and name
//! label  group  billing-*  sales         # (`x*` is a prefix, `*` every name)
//! grant  User:alice  sales  read,write   # principals get operations on labels
//! deny   User:*      sales  delete       # (`User:*` is everyone); a deny wins
//! ```
//!
//! Allowed: what a grant covers on a label of the resource and no deny does (`all` is
//! every operation; read, write, delete and alter imply describe; alter-configs implies
//! describe-configs). All else is denied, unknown codes too. `authorize_any` is the
//! SDK's default (it asks about the name `*`). The file is read every second: a changed
//! one that parses is the policy from the next request; one that does not is logged.

use std::sync::{Arc, RwLock, Weak};

use drover_abi::{
    authorizer::{AclOperation as Op, Action, Decision, PatternType, RequestContext, ResourceType},
    sdk::{AuthorizerPlugin, PluginContext, PluginInfo},
    PluginError,
};

/// A policy: super users, labels (type, name, prefix?, label), rules (grant?, who, label, ops).
#[derive(Debug, Default)]
pub struct Policy {
    supers: Vec<String>,
    labels: Vec<(ResourceType, String, bool, String)>,
    rules: Vec<(bool, String, String, Vec<Op>)>,
}

impl Policy {
    /// Parses a policy file; the error names the first line it cannot read.
    pub fn parse(text: &str) -> Result<Policy, String> {
        let mut p = Policy::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("");
            let bad = || format!("line {}: cannot read `{}`", n + 1, line.trim());
            let op = |o| Op::from_name(o).filter(|o| o.code() > 1);
            match line.split_whitespace().collect::<Vec<_>>()[..] {
                [] => {}
                ["super", who] => p.supers.push(who.into()),
                ["label", kind, pattern, l] => {
                    let kind = ResourceType::from_name(kind).filter(|t| t.code() > 1);
                    let (x, prefix) = (pattern.trim_end_matches('*'), pattern.ends_with('*'));
                    let label = (kind.ok_or_else(bad)?, x.into(), prefix, l.into());
                    p.labels.push(label);
                }
                [verb @ ("grant" | "deny"), who, l, ops] => {
                    let ops = ops.split(',').map(op).collect::<Option<_>>();
                    let rule = (verb == "grant", who.into(), l.into(), ops.ok_or_else(bad)?);
                    p.rules.push(rule);
                }
                _ => return Err(bad()),
            }
        }
        Ok(p)
    }

    /// Whether `who` may do `a` (the rule in the module docs).
    pub fn allows(&self, who: &str, a: &Action) -> bool {
        if self.supers.iter().any(|s| s == who) {
            return true;
        }
        let known_op = a.operation.name().is_some() && a.operation.code() > 2;
        if !known_op || a.pattern_type != PatternType::Literal {
            return false; // an unknown resource type has no label
        }
        let name = a.resource_name.as_str();
        let mut rules = self.rules.iter().filter(|(_, w, l, ops)| {
            let labelled = self.labels.iter().any(|(t, x, prefix, label)| {
                label == l
                    && *t == a.resource_type
                    && name.starts_with(x.as_str())
                    && (*prefix || name.len() == x.len())
            });
            (w == who || w == "User:*") && covers(ops, a.operation) && labelled
        });
        rules.next().is_some_and(|r| r.0) && rules.all(|r| r.0) // some grant, no deny
    }
}

fn covers(ops: &[Op], op: Op) -> bool {
    let implied = match op {
        Op::Describe => [Op::Read, Op::Write, Op::Delete, Op::Alter].as_slice(),
        Op::DescribeConfigs => &[Op::AlterConfigs],
        _ => &[],
    };
    let covering = |o: &Op| *o == op || *o == Op::All || implied.contains(o);
    ops.iter().any(covering)
}

/// The plugin: the current policy, replaced by a reload thread when the file changes.
pub struct PolicyFile(Arc<RwLock<Arc<Policy>>>);

impl PluginInfo for PolicyFile {
    const NAME: &'static str = "policy-file";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "example: principals, name patterns and labels from a file";
}

impl AuthorizerPlugin for PolicyFile {
    fn new(ctx: &PluginContext) -> Result<Self, PluginError> {
        let (key, path) = ctx.config.split_once('=').unwrap_or_default();
        let (usage, path) = (
            "expected `policy = \"<file>\"`",
            path.trim().trim_matches('"'),
        );
        if key.trim() != "policy" {
            return Err(PluginError::invalid_config(usage));
        }
        let invalid = |e: String| PluginError::invalid_config(format!("{path}: {e}"));
        let text = std::fs::read_to_string(path).map_err(|e| invalid(e.to_string()))?;
        let policy = Arc::new(Policy::parse(&text).map_err(invalid)?);
        let (current, path) = (Arc::new(RwLock::new(policy)), path.to_owned());
        let weak = Arc::downgrade(&current);
        std::thread::spawn(move || reload(path, Ok(text), weak));
        Ok(PolicyFile(current))
    }

    fn authorize(&self, c: &RequestContext, a: &[Action]) -> Result<Vec<Decision>, PluginError> {
        let policy = self.0.read().unwrap_or_else(|e| e.into_inner()).clone();
        let allowed = |a| Decision::allowed_if(policy.allows(&c.principal, a));
        Ok(a.iter().map(allowed).collect())
    }
}

/// Reads the file every second until the instance is dropped (and a second more).
fn reload(path: String, mut last: Result<String, String>, current: Weak<RwLock<Arc<Policy>>>) {
    while let Some(current) = current.upgrade() {
        let seen = std::fs::read_to_string(&path).map_err(|e| e.to_string());
        if seen != last {
            match seen.clone().and_then(|text| Policy::parse(&text)) {
                Ok(policy) => {
                    *current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(policy);
                    tracing::info!("{path}: policy reloaded");
                }
                Err(e) => tracing::warn!("{path}: {e}; the previous policy stays"),
            }
            last = seen;
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

drover_abi::export_authorizer!(PolicyFile);
