//! Drover's built-in ACL authorizer, plugin `acl`: Kafka's StandardAuthorizer semantics
//! over ACLs kept in a file (standalone) or in ZooKeeper (cluster mode), answered from
//! memory.
//!
//! # Configuration
//!
//! ```toml
//! [plugins.config.acl]
//! super_users = ["User:admin"]            # allowed everything
//! allow_everyone_if_no_acl_found = false  # Kafka's allow.everyone.if.no.acl.found
//! path = "/var/lib/drover/acls"           # standalone; the broker's default: <data_dir>/acls
//! poll_interval_ms = 1000                 # cluster mode: how often changes are polled
//! zk_root = "/drover-acls"                # cluster mode: below the broker's chroot
//! max_acls = 1000000                      # bounds
//! max_entries_per_resource = 10000
//! max_name_bytes = 1024
//! ```
//!
//! # Semantics
//!
//! See [`index::Index::authorize`] and [`index::Index::authorize_any`] for decisions,
//! [`acl`] for what bindings may be created and what a filter selects, [`file`](mod@file) and
//! [`zk`] for storage.
//!
//! Every decision reads one in-memory snapshot (a read lock held for the call); changes
//! build a new snapshot off the request path and swap it in. In cluster mode a
//! background thread polls the change counter every `poll_interval_ms` and reloads when
//! it moved, so a change made on another broker applies within about one interval (as
//! in Kafka, ACL changes apply asynchronously); a change made through this instance
//! applies to it at once.

pub mod acl;
pub mod config;
pub mod file;
pub mod index;
pub mod zk;

#[cfg(test)]
mod tests;

use std::{
    collections::{BTreeSet, HashSet},
    sync::{mpsc, Arc, Mutex, PoisonError, RwLock},
    time::{Duration, Instant},
};

use drover_abi::{
    authorizer::{
        AccessControlEntry, AclBinding, AclBindingFilter, AclCreateResult, AclDeleteResult,
        AclOperation, AclPermission, Action, Decision, RequestContext, ResourcePattern,
        ResourceType,
    },
    sdk::{AuthorizerPlugin, PluginContext, PluginInfo},
    std_types::{RNone, RResult, RSome, RString, RVec},
    PluginError,
};

use crate::{
    acl::{filter_matches, validate_binding, validate_filter},
    config::Config,
    file::FileStore,
    index::{Index, Policy, Who},
    zk::ZkStore,
};

/// How many times a change is retried when other brokers keep changing ACLs.
const WRITE_ATTEMPTS: usize = 20;
/// The least time between two logged poll failures.
const POLL_ERROR_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// One consistent view of the ACLs.
struct State {
    acls: BTreeSet<AclBinding>,
    index: Index,
    /// The ZooKeeper counter version the set was read or written at (0 standalone).
    version: i32,
}

impl State {
    fn new(acls: BTreeSet<AclBinding>, version: i32) -> State {
        let index = Index::build(&acls);
        State {
            acls,
            index,
            version,
        }
    }
}

enum Backend {
    File(FileStore),
    Zk(ZkStore),
}

struct Shared {
    config: Config,
    policy: Policy,
    backend: Backend,
    state: RwLock<Arc<State>>,
    /// Serializes changes made through this instance.
    writer: Mutex<()>,
}

impl Shared {
    fn current(&self) -> Arc<State> {
        self.state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Installs `state` unless a newer one (a higher counter version) is in place.
    fn install(&self, state: Arc<State>) {
        let mut current = self.state.write().unwrap_or_else(PoisonError::into_inner);
        if state.version >= current.version {
            *current = state;
        }
    }

    /// Applies `change` to the current set durably and returns its result. `change`
    /// returns the new set (`None`: nothing to write) and the result; in cluster mode
    /// it may run again on a fresher set when another broker wrote in between.
    fn mutate<R>(
        &self,
        change: impl Fn(&BTreeSet<AclBinding>) -> (Option<BTreeSet<AclBinding>>, R),
    ) -> Result<R, PluginError> {
        let _writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        for _ in 0..WRITE_ATTEMPTS {
            let mut base = self.current();
            if let Backend::Zk(zk) = &self.backend {
                if zk.version()? != base.version {
                    let (acls, version) = zk.load()?;
                    base = Arc::new(State::new(acls, version));
                    self.install(base.clone());
                }
            }
            let (new, result) = change(&base.acls);
            let Some(new) = new else {
                return Ok(result);
            };
            let version = match &self.backend {
                Backend::File(file) => {
                    file.save(&new)?;
                    0
                }
                Backend::Zk(zk) => match zk.write(base.version, &base.acls, &new)? {
                    Some(version) => version,
                    None => continue,
                },
            };
            self.install(Arc::new(State::new(new, version)));
            return Ok(result);
        }
        Err(PluginError::unavailable(
            "authorizer `acl`: other brokers kept changing ACLs; try again",
        ))
    }

    /// One poll (cluster mode): reloads when the counter moved.
    fn poll(&self) -> Result<(), PluginError> {
        let Backend::Zk(zk) = &self.backend else {
            return Ok(());
        };
        if zk.version()? == self.current().version {
            return Ok(());
        }
        let (acls, version) = zk.load()?;
        let count = acls.len();
        self.install(Arc::new(State::new(acls, version)));
        tracing::debug!(version, count, "ACLs reloaded from ZooKeeper");
        Ok(())
    }
}

/// The `acl` authorizer plugin.
pub struct AclAuthorizer {
    shared: Arc<Shared>,
    /// Dropping it stops the poller (cluster mode).
    _stop: Option<mpsc::Sender<()>>,
}

impl PluginInfo for AclAuthorizer {
    const NAME: &'static str = "acl";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "Kafka's ACLs (StandardAuthorizer semantics), stored in a file or ZooKeeper";
}

impl AclAuthorizer {
    /// Opens the authorizer from a config string, standalone (the file at `path`).
    pub fn open_with_config(config: &str) -> Result<AclAuthorizer, PluginError> {
        AclAuthorizer::open(&PluginContext {
            config: config.to_owned(),
            zookeeper: None,
        })
    }

    fn open(ctx: &PluginContext) -> Result<AclAuthorizer, PluginError> {
        let config = Config::parse(&ctx.config)?;
        let policy = Policy {
            super_users: config.super_users.iter().cloned().collect::<HashSet<_>>(),
            allow_everyone_if_no_acl_found: config.allow_everyone_if_no_acl_found,
        };
        let (backend, acls, version) = match &ctx.zookeeper {
            Some(session) => {
                let zk = ZkStore::new(session.clone(), config.zk_root.clone());
                zk.init()?;
                let (acls, version) = zk.load()?;
                (Backend::Zk(zk), acls, version)
            }
            None => {
                let path = config.path.clone().ok_or_else(|| {
                    PluginError::invalid_config(
                        "authorizer `acl`: `path` is required standalone (the ACL file, e.g. \
                         path = \"/var/lib/drover/acls\"; the broker sets <data_dir>/acls)",
                    )
                })?;
                let file = FileStore::new(path);
                let acls = file.load()?;
                (Backend::File(file), acls, 0)
            }
        };
        tracing::info!(
            count = acls.len(),
            storage = if matches!(backend, Backend::Zk(_)) {
                "zookeeper"
            } else {
                "file"
            },
            "ACLs loaded"
        );
        let shared = Arc::new(Shared {
            policy,
            backend,
            state: RwLock::new(Arc::new(State::new(acls, version))),
            writer: Mutex::new(()),
            config,
        });
        let stop = matches!(shared.backend, Backend::Zk(_)).then(|| spawn_poller(shared.clone()));
        Ok(AclAuthorizer {
            shared,
            _stop: stop,
        })
    }

    /// Polls ZooKeeper once now (cluster mode; a no-op standalone), as the background
    /// thread does every `poll_interval_ms`.
    pub fn poll_now(&self) -> Result<(), PluginError> {
        self.shared.poll()
    }
}

/// Starts the poller; it stops within one interval of the returned sender's drop.
fn spawn_poller(shared: Arc<Shared>) -> mpsc::Sender<()> {
    let (stop, stopped) = mpsc::channel::<()>();
    let interval = shared.config.poll_interval;
    let spawned = std::thread::Builder::new()
        .name("acl-poller".into())
        .spawn(move || {
            let mut last_logged: Option<Instant> = None;
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                if let Err(e) = shared.poll() {
                    if last_logged.is_none_or(|t| t.elapsed() >= POLL_ERROR_LOG_INTERVAL) {
                        last_logged = Some(Instant::now());
                        tracing::warn!(
                            error = %e,
                            "cannot reload ACLs from ZooKeeper; deciding on the last ACLs read"
                        );
                    }
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the ACL poller: ACL changes of other brokers will not apply");
    }
    stop
}

/// The smallest entry in the order of [`AccessControlEntry`] (to range over a pattern).
fn min_entry() -> AccessControlEntry {
    AccessControlEntry {
        principal: RString::new(),
        host: RString::new(),
        operation: AclOperation::from_code(i8::MIN),
        permission: AclPermission::from_code(i8::MIN),
    }
}

fn entries_of(acls: &BTreeSet<AclBinding>, pattern: &ResourcePattern) -> usize {
    let from = AclBinding {
        pattern: pattern.clone(),
        entry: min_entry(),
    };
    acls.range(from..)
        .take_while(|b| &b.pattern == pattern)
        .count()
}

fn who(context: &RequestContext) -> Who<'_> {
    Who {
        principal: &context.principal,
        host: &context.client_address,
    }
}

impl AuthorizerPlugin for AclAuthorizer {
    fn new(ctx: &PluginContext) -> Result<Self, PluginError> {
        AclAuthorizer::open(ctx)
    }

    fn authorize(
        &self,
        context: &RequestContext,
        actions: &[Action],
    ) -> Result<Vec<Decision>, PluginError> {
        let state = self
            .shared
            .state
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(actions
            .iter()
            .map(|a| {
                Decision::allowed_if(state.index.authorize(
                    &self.shared.policy,
                    who(context),
                    a.resource_type,
                    a.pattern_type,
                    &a.resource_name,
                    a.operation,
                ))
            })
            .collect())
    }

    fn authorize_any(
        &self,
        context: &RequestContext,
        resource_type: ResourceType,
        operation: AclOperation,
    ) -> Result<Decision, PluginError> {
        let state = self
            .shared
            .state
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(Decision::allowed_if(state.index.authorize_any(
            &self.shared.policy,
            who(context),
            resource_type,
            operation,
        )))
    }

    fn acls(&self, filter: &AclBindingFilter) -> Result<Vec<AclBinding>, PluginError> {
        validate_filter(filter)?;
        let state = self.shared.current();
        Ok(state
            .acls
            .iter()
            .filter(|b| filter_matches(filter, b))
            .cloned()
            .collect())
    }

    fn create_acls(&self, bindings: Vec<AclBinding>) -> Result<Vec<AclCreateResult>, PluginError> {
        let config = &self.shared.config;
        let checked: Vec<Result<(), PluginError>> = bindings
            .iter()
            .map(|b| validate_binding(b, config.max_name_bytes))
            .collect();
        self.shared.mutate(|acls| {
            let mut new = acls.clone();
            let results: Vec<AclCreateResult> = bindings
                .iter()
                .zip(&checked)
                .map(|(binding, check)| {
                    if let Err(e) = check {
                        return RSome(e.clone());
                    }
                    if new.contains(binding) {
                        return RNone;
                    }
                    if new.len() >= config.max_acls {
                        return RSome(PluginError::invalid_input(format!(
                            "authorizer `acl` holds {} ACLs, its limit (max_acls)",
                            new.len()
                        )));
                    }
                    if entries_of(&new, &binding.pattern) >= config.max_entries_per_resource {
                        return RSome(PluginError::invalid_input(format!(
                            "resource {} {} `{}` has {} ACL entries, the limit \
                             (max_entries_per_resource)",
                            binding.pattern.pattern_type,
                            binding.pattern.resource_type,
                            binding.pattern.name,
                            config.max_entries_per_resource
                        )));
                    }
                    new.insert(binding.clone());
                    RNone
                })
                .collect();
            let changed = new.len() != acls.len();
            (changed.then_some(new), results)
        })
    }

    fn delete_acls(
        &self,
        filters: Vec<AclBindingFilter>,
    ) -> Result<Vec<AclDeleteResult>, PluginError> {
        let checked: Vec<Result<(), PluginError>> = filters.iter().map(validate_filter).collect();
        self.shared.mutate(|acls| {
            let mut new = acls.clone();
            let results: Vec<AclDeleteResult> = filters
                .iter()
                .zip(&checked)
                .map(|(filter, check)| {
                    if let Err(e) = check {
                        return RResult::RErr(e.clone());
                    }
                    // Each filter selects from the set as it was before the call, so a
                    // binding two filters select is reported by both.
                    let matched: RVec<AclBinding> = acls
                        .iter()
                        .filter(|b| filter_matches(filter, b))
                        .cloned()
                        .collect();
                    for b in &matched {
                        new.remove(b);
                    }
                    RResult::ROk(matched)
                })
                .collect();
            let changed = new.len() != acls.len();
            (changed.then_some(new), results)
        })
    }
}

drover_abi::export_authorizer!(AclAuthorizer);
