//! Authorization (issue 30): the broker's side of the authorizer plugin kind.
//!
//! [`Authz`] is the configured authorizer (`[authorizer] plugin`), or none. A rescan
//! that replaces or adds the configured authorizer's file swaps the instance
//! ([`Authz::replace`]): every request asks the instance that is current when it
//! starts. For each request the server makes a [`RequestAuthz`] from its connection
//! ([`context`]: principal, listener, security protocol, SASL mechanism, client
//! address, client id, API key and version, correlation id); the handlers ask it about
//! the request's actions, each handler in one place (docs/design.md, "Authorization").
//!
//! Without an authorizer a `RequestAuthz` is a `None` that allows everything without
//! building anything, so a broker without `[authorizer]` behaves and costs as before.
//!
//! **Fails closed**: a plugin call that errors, panicked (the handle then keeps the
//! instance out of service) or answers the wrong number of decisions denies every
//! action it was asked about; each is counted (`drover_authorizer_errors_total`) and
//! logged at most once a second. `authorize` is memory-only and runs on the request's
//! thread; the ACL management calls, which may write to disk or ZooKeeper, run on the
//! blocking pool within `authorizer.acl_call_timeout_ms` ([`acls`]).

pub mod acls;
pub mod context;

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, RwLock},
};

pub use drover_abi::authorizer::{
    AccessControlEntry, AclBinding, AclBindingFilter, AclOperation, AclPermission, Action,
    Decision, PatternType, RequestContext, ResourcePattern, ResourceType, CLUSTER_RESOURCE_NAME,
    WILDCARD,
};
use drover_abi::{
    authorizer::{AclCreateResult, AclDeleteResult},
    ErrorKind,
};

use crate::{
    metrics::Metrics,
    plugins::{AuthorizerHandle, CallError},
};

/// What the broker asks an authorizer instance (the loaded plugin's handle, or a test's
/// fake).
pub trait Authorizer: Send + Sync {
    /// One decision per action, in order, or why not.
    fn authorize(
        &self,
        context: &RequestContext,
        actions: &[Action],
    ) -> Result<Vec<Decision>, CallError>;
    /// Whether the principal may do `operation` on some resource of `resource_type`.
    fn authorize_any(
        &self,
        context: &RequestContext,
        resource_type: ResourceType,
        operation: AclOperation,
    ) -> Result<Decision, CallError>;
    /// The bindings `filter` selects.
    fn acls(&self, filter: &AclBindingFilter) -> Result<Vec<AclBinding>, CallError>;
    /// Creates bindings; one result per binding.
    fn create_acls(&self, bindings: Vec<AclBinding>) -> Result<Vec<AclCreateResult>, CallError>;
    /// Deletes what each filter selects; one result per filter.
    fn delete_acls(
        &self,
        filters: Vec<AclBindingFilter>,
    ) -> Result<Vec<AclDeleteResult>, CallError>;
}

impl Authorizer for AuthorizerHandle {
    fn authorize(
        &self,
        context: &RequestContext,
        actions: &[Action],
    ) -> Result<Vec<Decision>, CallError> {
        AuthorizerHandle::authorize(self, context, actions)
    }
    fn authorize_any(
        &self,
        context: &RequestContext,
        resource_type: ResourceType,
        operation: AclOperation,
    ) -> Result<Decision, CallError> {
        AuthorizerHandle::authorize_any(self, context, resource_type, operation)
    }
    fn acls(&self, filter: &AclBindingFilter) -> Result<Vec<AclBinding>, CallError> {
        AuthorizerHandle::acls(self, filter)
    }
    fn create_acls(&self, bindings: Vec<AclBinding>) -> Result<Vec<AclCreateResult>, CallError> {
        AuthorizerHandle::create_acls(self, bindings)
    }
    fn delete_acls(
        &self,
        filters: Vec<AclBindingFilter>,
    ) -> Result<Vec<AclDeleteResult>, CallError> {
        AuthorizerHandle::delete_acls(self, filters)
    }
}

/// A configured authorizer that has not started (cluster mode, until the broker's
/// ZooKeeper session is connected): every call fails, so everything is denied.
struct NotStarted(String);

impl NotStarted {
    fn error(&self) -> CallError {
        CallError::Plugin {
            plugin: self.0.clone(),
            error: drover_abi::PluginError::new(
                ErrorKind::Unavailable,
                "the authorizer has not started yet (cluster mode: it starts once the \
                 broker's ZooKeeper session is connected)",
            ),
        }
    }
}

impl Authorizer for NotStarted {
    fn authorize(&self, _: &RequestContext, _: &[Action]) -> Result<Vec<Decision>, CallError> {
        Err(self.error())
    }
    fn authorize_any(
        &self,
        _: &RequestContext,
        _: ResourceType,
        _: AclOperation,
    ) -> Result<Decision, CallError> {
        Err(self.error())
    }
    fn acls(&self, _: &AclBindingFilter) -> Result<Vec<AclBinding>, CallError> {
        Err(self.error())
    }
    fn create_acls(&self, _: Vec<AclBinding>) -> Result<Vec<AclCreateResult>, CallError> {
        Err(self.error())
    }
    fn delete_acls(&self, _: Vec<AclBindingFilter>) -> Result<Vec<AclDeleteResult>, CallError> {
        Err(self.error())
    }
}

/// The configured authorizer, if any; the instance is replaced by rescans.
pub struct Authz {
    active: Option<Active>,
    metrics: Arc<Metrics>,
    acl_call_timeout: std::time::Duration,
}

struct Active {
    name: String,
    instance: RwLock<Arc<dyn Authorizer>>,
}

impl Authz {
    /// No authorizer: everything is allowed, the ACL APIs answer SECURITY_DISABLED.
    pub fn disabled(metrics: Arc<Metrics>) -> Authz {
        Authz {
            active: None,
            metrics,
            acl_call_timeout: std::time::Duration::from_secs(10),
        }
    }

    /// The authorizer plugin `name` with its started `instance`; ACL management calls
    /// get `acl_call_timeout_ms` each.
    pub fn new(
        name: &str,
        instance: Arc<dyn Authorizer>,
        metrics: Arc<Metrics>,
        acl_call_timeout_ms: u64,
    ) -> Authz {
        Authz {
            active: Some(Active {
                name: name.to_owned(),
                instance: RwLock::new(instance),
            }),
            metrics,
            acl_call_timeout: std::time::Duration::from_millis(acl_call_timeout_ms.max(1)),
        }
    }

    /// The authorizer `[authorizer] plugin` names, with the instance startup started.
    /// A name without an instance (cluster mode until the instance is started and
    /// [`Authz::replace`]d in) denies everything rather than allow it.
    pub fn configured(
        name: Option<&str>,
        instance: Option<Arc<AuthorizerHandle>>,
        metrics: Arc<Metrics>,
        acl_call_timeout_ms: u64,
    ) -> Authz {
        match (name, instance) {
            (None, _) => Authz::disabled(metrics),
            (Some(name), Some(instance)) => {
                Authz::new(name, instance, metrics, acl_call_timeout_ms)
            }
            (Some(name), None) => Authz::new(
                name,
                Arc::new(NotStarted(name.to_owned())),
                metrics,
                acl_call_timeout_ms,
            ),
        }
    }

    /// Whether an authorizer is configured.
    pub fn is_enabled(&self) -> bool {
        self.active.is_some()
    }

    /// The configured authorizer's name.
    pub fn name(&self) -> Option<&str> {
        self.active.as_ref().map(|a| a.name.as_str())
    }

    /// The current instance.
    pub fn instance(&self) -> Option<Arc<dyn Authorizer>> {
        self.active
            .as_ref()
            .map(|a| Arc::clone(&a.instance.read().unwrap_or_else(|e| e.into_inner())))
    }

    /// Makes `instance` the one every later request asks (a rescan replaced or added
    /// the configured plugin's file). No-op without a configured authorizer.
    pub fn replace(&self, instance: Arc<dyn Authorizer>) {
        if let Some(active) = &self.active {
            *active.instance.write().unwrap_or_else(|e| e.into_inner()) = instance;
        }
    }

    /// The checks of one request of `api`, in the context `context` builds (called only
    /// when an authorizer is configured).
    pub fn request(
        &self,
        api: &'static str,
        context: impl FnOnce() -> RequestContext,
    ) -> RequestAuthz {
        match self.instance() {
            None => RequestAuthz(None),
            Some(instance) => RequestAuthz(Some(Arc::new(Asking {
                instance,
                context: context(),
                metrics: Arc::clone(&self.metrics),
                api,
            }))),
        }
    }

    /// The metrics the facade counts into.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The time budget of one ACL management call.
    pub fn acl_call_timeout(&self) -> std::time::Duration {
        self.acl_call_timeout
    }
}

/// The authorization checks of one request: allows everything when no authorizer is
/// configured. Cheap to clone; handlers on the blocking pool take it along.
#[derive(Clone, Default)]
pub struct RequestAuthz(Option<Arc<Asking>>);

struct Asking {
    instance: Arc<dyn Authorizer>,
    context: RequestContext,
    metrics: Arc<Metrics>,
    api: &'static str,
}

/// Names a request may act on: all of them (no authorizer), or those allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowed {
    /// Every name.
    All,
    /// These names only.
    Only(HashSet<String>),
}

impl Allowed {
    /// Whether `name` is allowed.
    pub fn contains(&self, name: &str) -> bool {
        match self {
            Allowed::All => true,
            Allowed::Only(names) => names.contains(name),
        }
    }
}

/// A literal action on `name` (every check of a request is on a concrete resource).
pub fn action(resource_type: ResourceType, name: &str, operation: AclOperation) -> Action {
    Action {
        resource_type,
        resource_name: name.into(),
        pattern_type: PatternType::Literal,
        operation,
        reference_count: 1,
        log_if_allowed: true,
        log_if_denied: true,
    }
}

/// The operations Kafka reports for a resource type in KIP-430's authorized operations
/// (Kafka's `AclEntry.supportedOperations`).
pub fn supported_operations(resource_type: ResourceType) -> &'static [AclOperation] {
    use AclOperation as Op;
    match resource_type {
        ResourceType::Topic => &[
            Op::Read,
            Op::Write,
            Op::Create,
            Op::Describe,
            Op::Delete,
            Op::Alter,
            Op::DescribeConfigs,
            Op::AlterConfigs,
        ],
        ResourceType::Group => &[
            Op::Read,
            Op::Describe,
            Op::Delete,
            Op::DescribeConfigs,
            Op::AlterConfigs,
        ],
        ResourceType::Cluster => &[
            Op::Create,
            Op::ClusterAction,
            Op::DescribeConfigs,
            Op::AlterConfigs,
            Op::IdempotentWrite,
            Op::Alter,
            Op::Describe,
        ],
        ResourceType::TransactionalId => &[Op::Describe, Op::Write],
        _ => &[],
    }
}

/// KIP-430's bit field of `ops` (bit `code` set for each operation).
pub fn operations_bits(ops: impl IntoIterator<Item = AclOperation>) -> i32 {
    ops.into_iter()
        .filter(|op| (0..32).contains(&op.code()))
        .fold(0, |bits, op| bits | (1 << op.code()))
}

impl RequestAuthz {
    /// Allows everything (no authorizer; tools and tests).
    pub fn allow_all() -> RequestAuthz {
        RequestAuthz(None)
    }

    /// Whether an authorizer decides this request.
    pub fn is_enabled(&self) -> bool {
        self.0.is_some()
    }

    /// The request's context, when an authorizer decides it.
    pub fn context(&self) -> Option<&RequestContext> {
        self.0.as_ref().map(|a| &a.context)
    }

    /// One decision per action, failing closed: an error, a panic or a wrong number of
    /// decisions denies them all.
    pub fn authorize(&self, actions: &[Action]) -> Vec<bool> {
        let Some(asking) = &self.0 else {
            return vec![true; actions.len()];
        };
        if actions.is_empty() {
            return Vec::new();
        }
        let allowed = match asking.instance.authorize(&asking.context, actions) {
            Ok(decisions) if decisions.len() == actions.len() => {
                decisions.iter().map(|d| d.is_allowed()).collect()
            }
            Ok(decisions) => {
                asking.failed(&CallError::Plugin {
                    plugin: String::new(),
                    error: drover_abi::PluginError::new(
                        ErrorKind::Internal,
                        format!(
                            "authorize answered {} decisions for {} actions",
                            decisions.len(),
                            actions.len()
                        ),
                    ),
                });
                vec![false; actions.len()]
            }
            Err(e) => {
                asking.failed(&e);
                vec![false; actions.len()]
            }
        };
        asking.count(actions, &allowed);
        allowed
    }

    /// Whether `operation` on the resource `name` of `resource_type` is allowed.
    pub fn allows(&self, resource_type: ResourceType, name: &str, operation: AclOperation) -> bool {
        if self.0.is_none() {
            return true;
        }
        self.authorize(&[action(resource_type, name, operation)])[0]
    }

    /// As [`Self::allows`], without asking the authorizer to log the decision (an
    /// implicit check, such as filtering what a listing shows).
    pub fn allows_quietly(
        &self,
        resource_type: ResourceType,
        name: &str,
        operation: AclOperation,
    ) -> bool {
        if self.0.is_none() {
            return true;
        }
        let mut a = action(resource_type, name, operation);
        a.log_if_allowed = false;
        a.log_if_denied = false;
        self.authorize(&[a])[0]
    }

    /// Whether `operation` on the cluster is allowed.
    pub fn allows_cluster(&self, operation: AclOperation) -> bool {
        self.allows(ResourceType::Cluster, CLUSTER_RESOURCE_NAME, operation)
    }

    /// The names of `names` on which `operation` is allowed, asked once per distinct
    /// name with its reference count (Kafka's `filterByAuthorized`).
    pub fn allowed_names<'n>(
        &self,
        resource_type: ResourceType,
        operation: AclOperation,
        names: impl IntoIterator<Item = &'n str>,
    ) -> Allowed {
        self.allowed_names_logged(resource_type, operation, names, true)
    }

    /// As [`Self::allowed_names`], with the authorizer told not to log the decisions
    /// (listings that only hide what may not be seen).
    pub fn allowed_names_quietly<'n>(
        &self,
        resource_type: ResourceType,
        operation: AclOperation,
        names: impl IntoIterator<Item = &'n str>,
    ) -> Allowed {
        self.allowed_names_logged(resource_type, operation, names, false)
    }

    fn allowed_names_logged<'n>(
        &self,
        resource_type: ResourceType,
        operation: AclOperation,
        names: impl IntoIterator<Item = &'n str>,
        log: bool,
    ) -> Allowed {
        if self.0.is_none() {
            return Allowed::All;
        }
        let mut counts: HashMap<&str, u32> = HashMap::new();
        let mut order = Vec::new();
        for name in names {
            let count = counts.entry(name).or_insert_with(|| {
                order.push(name);
                0
            });
            *count = count.saturating_add(1);
        }
        let actions: Vec<Action> = order
            .iter()
            .map(|name| Action {
                reference_count: counts[name],
                log_if_allowed: log,
                log_if_denied: log,
                ..action(resource_type, name, operation)
            })
            .collect();
        let decisions = self.authorize(&actions);
        Allowed::Only(
            order
                .into_iter()
                .zip(decisions)
                .filter(|(_, allowed)| *allowed)
                .map(|(name, _)| name.to_owned())
                .collect(),
        )
    }

    /// Whether `operation` is allowed on at least one resource of `resource_type`
    /// (KIP-679), failing closed.
    pub fn allows_any(&self, resource_type: ResourceType, operation: AclOperation) -> bool {
        let Some(asking) = &self.0 else {
            return true;
        };
        let allowed = match asking
            .instance
            .authorize_any(&asking.context, resource_type, operation)
        {
            Ok(decision) => decision.is_allowed(),
            Err(e) => {
                asking.failed(&e);
                false
            }
        };
        asking
            .metrics
            .authorizer_decisions(asking.api, u64::from(allowed), u64::from(!allowed));
        allowed
    }

    /// KIP-430: the bit field of the operations allowed on `name` of `resource_type`
    /// among those Kafka reports for the type; every one of them without an authorizer
    /// (as Kafka's `AuthHelper.authorizedOperations`).
    pub fn authorized_operations(&self, resource_type: ResourceType, name: &str) -> i32 {
        let ops = supported_operations(resource_type);
        if self.0.is_none() {
            return operations_bits(ops.iter().copied());
        }
        let actions: Vec<Action> = ops
            .iter()
            .map(|&op| Action {
                log_if_allowed: false,
                log_if_denied: false,
                ..action(resource_type, name, op)
            })
            .collect();
        let allowed = self.authorize(&actions);
        operations_bits(
            ops.iter()
                .zip(allowed)
                .filter(|(_, allowed)| *allowed)
                .map(|(op, _)| *op),
        )
    }
}

/// The `drover_authorizer_errors_total` reason of a failed call.
fn failure_reason(error: &CallError) -> &'static str {
    match error {
        CallError::OutOfService { .. } => "out_of_service",
        CallError::Plugin { error, .. } if error.kind == ErrorKind::Panicked => "panicked",
        _ => "error",
    }
}

impl Asking {
    /// A failed call: counted and logged at most once a second; the caller denies.
    fn failed(&self, error: &CallError) {
        let reason = failure_reason(error);
        self.metrics.authorizer_error(reason);
        crate::warn_limited!(
            "authz.failed",
            api = self.api,
            principal = %self.context.principal,
            reason,
            "authorizer call failed, denying the request's actions: {error}"
        );
    }

    fn count(&self, actions: &[Action], allowed: &[bool]) {
        let granted = allowed.iter().filter(|a| **a).count() as u64;
        let denied = allowed.len() as u64 - granted;
        self.metrics.authorizer_decisions(self.api, granted, denied);
        if denied > 0 {
            if let Some((a, _)) = actions
                .iter()
                .zip(allowed)
                .find(|(a, allowed)| !**allowed && a.log_if_denied)
            {
                crate::info_limited!(
                    "authz.denied",
                    api = self.api,
                    principal = %self.context.principal,
                    client = %self.context.client_address,
                    operation = %a.operation,
                    resource_type = %a.resource_type,
                    resource = %a.resource_name,
                    denied,
                    "authorization denied"
                );
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
