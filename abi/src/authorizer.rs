//! The authorizer plugin kind: decides what an authenticated principal may do.
//!
//! The shape is Kafka's `Authorizer` (KIP-504): the broker asks, for each request, about
//! a list of [`Action`]s (an operation on a resource) in a [`RequestContext`] (who asks,
//! from where, with which API), and gets one [`Decision`] per action, in order. The call
//! is synchronous on the request path, so an authorizer answers from memory; ACL changes
//! are applied asynchronously (an authorizer that stores ACLs in ZooKeeper polls or
//! watches them off the request path). The host caches no decision.
//!
//! Authorizers that store ACLs implement [`Authorizer::acls`], [`Authorizer::create_acls`]
//! and [`Authorizer::delete_acls`] (Kafka's DescribeAcls, CreateAcls, DeleteAcls);
//! others answer [`crate::ErrorKind::Unsupported`] and the broker returns
//! SECURITY_DISABLED for those APIs.
//!
//! Contract every authorizer must meet (checked by the conformance suite, which runs
//! it through the loaded `.so`):
//! - exactly one decision per action, in the order of the actions;
//! - deterministic: the same context, actions and ACLs give the same decisions;
//! - an operation, resource type or pattern type it does not know is denied;
//! - a principal listed as a super user (its own config) is allowed everything;
//! - where an authorizer has ACLs, a matching DENY beats any ALLOW.
//!
//! The host fails closed: an error, a panic, or a decision missing from the answer
//! denies the action, and is counted and logged (rate-limited).
//!
//! The resource types, pattern types, operations and permissions are open values with
//! Kafka's wire codes (the `AclOperation`, `ResourceType`, `PatternType` and
//! `AclPermissionType` of the Kafka protocol guide), so a later minor may add one without
//! changing a layout; an authorizer denies a value it does not know.

use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    sabi_trait,
    sabi_types::VersionStrings,
    std_types::{RArc, RBox, ROption, RResult, RSlice, RString, RVec},
    StableAbi,
};

use crate::{error::PluginError, host::HostServices, manifest::OpenManifest};

macro_rules! open_code {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $code:literal => $text:literal,)* }) => {
        $(#[$meta])*
        #[repr(transparent)]
        #[derive(StableAbi, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(i8);

        #[allow(non_upper_case_globals)]
        impl $name {
            $($(#[$vmeta])* pub const $variant: $name = $name($code);)*

            /// The value with Kafka's wire code `code` (unknown codes are kept as they
            /// are, and denied).
            pub const fn from_code(code: i8) -> $name {
                $name(code)
            }

            /// Kafka's wire code.
            pub const fn code(self) -> i8 {
                self.0
            }

            /// The name Kafka's tools print (`TOPIC`, `READ`), or `None` for a code this
            /// build does not know.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($code => Some($text),)*
                    _ => None,
                }
            }

            /// The value named `name` (case-insensitive, `-` or `_` between words).
            pub fn from_name(name: &str) -> Option<$name> {
                let wanted = name.replace('-', "_");
                [$($name::$variant),*]
                    .into_iter()
                    .find(|v| v.name().is_some_and(|n| n.eq_ignore_ascii_case(&wanted)))
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self.name() {
                    Some(name) => f.write_str(name),
                    None => write!(f, "Unknown({})", self.0),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(self, f)
            }
        }
    };
}

open_code! {
    /// A resource type (Kafka's `ResourceType`).
    ResourceType {
        /// Not a type (a filter or binding with it is invalid).
        Unknown = 0 => "UNKNOWN",
        /// Any type: filters only.
        Any = 1 => "ANY",
        /// A topic, by name.
        Topic = 2 => "TOPIC",
        /// A consumer group (any type: classic, KIP-848, native, share), by id.
        Group = 3 => "GROUP",
        /// The cluster; its one resource is named `kafka-cluster`.
        Cluster = 4 => "CLUSTER",
        /// A transactional id.
        TransactionalId = 5 => "TRANSACTIONAL_ID",
        /// A delegation token (Drover issues none).
        DelegationToken = 6 => "DELEGATION_TOKEN",
        /// A user (for quotas and credentials).
        User = 7 => "USER",
    }
}

open_code! {
    /// How a resource name matches (Kafka's `PatternType`).
    PatternType {
        /// Not a pattern type (invalid).
        Unknown = 0 => "UNKNOWN",
        /// Any pattern type: filters only.
        Any = 1 => "ANY",
        /// Filters only: every binding that would apply to the literal name in the
        /// filter (literal equal, the `*` wildcard, prefixes of it).
        Match = 2 => "MATCH",
        /// The name itself; `*` matches every resource of the type.
        Literal = 3 => "LITERAL",
        /// Every resource whose name starts with it.
        Prefixed = 4 => "PREFIXED",
    }
}

open_code! {
    /// An operation (Kafka's `AclOperation`). Implications are the authorizer's to apply
    /// (Kafka: Read, Write, Delete or Alter imply Describe; AlterConfigs implies
    /// DescribeConfigs; All implies everything).
    AclOperation {
        /// Not an operation (invalid).
        Unknown = 0 => "UNKNOWN",
        /// Any operation: filters only.
        Any = 1 => "ANY",
        /// Every operation (in a binding).
        All = 2 => "ALL",
        /// Read a topic, join or commit in a group.
        Read = 3 => "READ",
        /// Write to a topic or under a transactional id.
        Write = 4 => "WRITE",
        /// Create topics.
        Create = 5 => "CREATE",
        /// Delete topics, records or groups.
        Delete = 6 => "DELETE",
        /// Alter a resource (partitions, ACLs, credentials).
        Alter = 7 => "ALTER",
        /// See a resource exists and its metadata.
        Describe = 8 => "DESCRIBE",
        /// Broker-to-broker actions.
        ClusterAction = 9 => "CLUSTER_ACTION",
        /// Read configs.
        DescribeConfigs = 10 => "DESCRIBE_CONFIGS",
        /// Change configs.
        AlterConfigs = 11 => "ALTER_CONFIGS",
        /// Idempotent produce (InitProducerId without a transactional id).
        IdempotentWrite = 12 => "IDEMPOTENT_WRITE",
        /// Create delegation tokens.
        CreateTokens = 13 => "CREATE_TOKENS",
        /// Describe delegation tokens.
        DescribeTokens = 14 => "DESCRIBE_TOKENS",
        /// KIP-939 two-phase commit.
        TwoPhaseCommit = 15 => "TWO_PHASE_COMMIT",
    }
}

open_code! {
    /// ALLOW or DENY (Kafka's `AclPermissionType`).
    AclPermission {
        /// Not a permission (invalid).
        Unknown = 0 => "UNKNOWN",
        /// Either: filters only.
        Any = 1 => "ANY",
        /// Denies; beats any ALLOW that matches too.
        Deny = 2 => "DENY",
        /// Allows.
        Allow = 3 => "ALLOW",
    }
}

/// Who asks, from where, with which request. Valid during the call only.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct RequestContext {
    /// The principal, `Type:name` as Kafka writes it: `User:alice` (SASL user, or a
    /// client certificate's mapped subject), `User:ANONYMOUS` on an unauthenticated
    /// listener.
    pub principal: RString,
    /// The listener's name (`CLIENT`, `PLAINTEXT`).
    pub listener: RString,
    /// The listener's security protocol: `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT`,
    /// `SASL_SSL`.
    pub security_protocol: RString,
    /// The SASL mechanism the connection authenticated with, if any (`SCRAM-SHA-512`).
    pub sasl_mechanism: ROption<RString>,
    /// The client's IP address, as text (`127.0.0.1`, `::1`).
    pub client_address: RString,
    /// The request header's client id (may be empty).
    pub client_id: RString,
    /// The request's API key (Kafka's, e.g. 0 Produce; Drover's native protocol uses
    /// keys from 10000, docs/design.md "the native protocol").
    pub api_key: i16,
    /// The request's API version.
    pub api_version: i16,
    /// The request's correlation id, for logs.
    pub correlation_id: i32,
}

/// One operation on one resource, as the broker asks about it (Kafka's `Action`).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct Action {
    /// The resource's type.
    pub resource_type: ResourceType,
    /// The resource's name (`kafka-cluster` for the cluster).
    pub resource_name: RString,
    /// How `resource_name` is meant: [`PatternType::Literal`] for every check of a
    /// request (a concrete resource).
    pub pattern_type: PatternType,
    /// The operation.
    pub operation: AclOperation,
    /// How many times the request refers to the resource (for audit logs).
    pub reference_count: u32,
    /// Whether an allowed decision should be logged (audit): false for implicit checks,
    /// such as filtering the topics Metadata lists.
    pub log_if_allowed: bool,
    /// Whether a denied decision should be logged.
    pub log_if_denied: bool,
}

/// ALLOWED or DENIED (Kafka's `AuthorizationResult`): an open value; the host treats
/// anything but [`Decision::ALLOWED`] as denied.
#[repr(transparent)]
#[derive(StableAbi, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision(u8);

impl Decision {
    /// The action is allowed.
    pub const ALLOWED: Decision = Decision(1);
    /// The action is denied.
    pub const DENIED: Decision = Decision(0);

    /// `ALLOWED` when `allowed`, else `DENIED`.
    pub const fn allowed_if(allowed: bool) -> Decision {
        if allowed {
            Decision::ALLOWED
        } else {
            Decision::DENIED
        }
    }

    /// Whether this is [`Decision::ALLOWED`] (any other value denies).
    pub const fn is_allowed(self) -> bool {
        self.0 == Decision::ALLOWED.0
    }
}

impl std::fmt::Debug for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_allowed() {
            "ALLOWED"
        } else {
            "DENIED"
        })
    }
}

/// A resource pattern of an ACL binding: a type, a name and how the name matches.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourcePattern {
    /// Never `Any` or `Unknown` in a binding.
    pub resource_type: ResourceType,
    /// The name, the prefix, or `*` (literal only: every resource of the type).
    pub name: RString,
    /// [`PatternType::Literal`] or [`PatternType::Prefixed`] in a binding.
    pub pattern_type: PatternType,
}

/// Who may or may not do what, from where (Kafka's `AccessControlEntry`).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AccessControlEntry {
    /// `User:alice`, or `User:*` for every principal.
    pub principal: RString,
    /// The client's IP address, or `*` for any.
    pub host: RString,
    /// The operation ([`AclOperation::All`] for every one).
    pub operation: AclOperation,
    /// ALLOW or DENY.
    pub permission: AclPermission,
}

/// One ACL: a resource pattern and an entry (Kafka's `AclBinding`).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    /// Which resources.
    pub pattern: ResourcePattern,
    /// Who, from where, what, allowed or denied.
    pub entry: AccessControlEntry,
}

/// Selects ACL bindings (Kafka's `AclBindingFilter`, as DescribeAcls and DeleteAcls
/// carry it): every field must match; `RNone` and the `Any` values match everything.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct AclBindingFilter {
    /// A type, or [`ResourceType::Any`].
    pub resource_type: ResourceType,
    /// A name (compared as the pattern type says), or `RNone` for any.
    pub name: ROption<RString>,
    /// `Literal`, `Prefixed`, `Any`, or `Match` (bindings that would apply to `name`).
    pub pattern_type: PatternType,
    /// A principal, or `RNone` for any.
    pub principal: ROption<RString>,
    /// A host, or `RNone` for any.
    pub host: ROption<RString>,
    /// An operation, or [`AclOperation::Any`].
    pub operation: AclOperation,
    /// A permission, or [`AclPermission::Any`].
    pub permission: AclPermission,
}

/// The outcome of one binding of [`Authorizer::create_acls`]: `RNone` when created (or
/// already present), else why not ([`crate::ErrorKind::InvalidInput`] for a binding
/// Kafka would refuse, such as a `Match` pattern).
pub type AclCreateResult = ROption<PluginError>;

/// The outcome of one filter of [`Authorizer::delete_acls`]: the bindings it deleted,
/// or why it could not.
pub type AclDeleteResult = RResult<RVec<AclBinding>, PluginError>;

/// The authorizer interface across the boundary. Plugin authors implement
/// [`crate::sdk::AuthorizerPlugin`]; the SDK adapts it to this trait. Methods are called
/// concurrently from several host threads.
#[sabi_trait]
pub trait Authorizer: Send + Sync {
    /// One decision per action of `actions`, in order (contract in the module docs).
    /// Errors deny every action.
    fn authorize(
        &self,
        context: &RequestContext,
        actions: RSlice<'_, Action>,
    ) -> RResult<RVec<Decision>, PluginError>;

    /// Whether `context`'s principal may do `operation` on at least one resource of
    /// `resource_type` (Kafka's `authorizeByResourceType`, KIP-679: an idempotent
    /// producer needs IdempotentWrite on the cluster or Write on some topic). An
    /// authorizer without ACLs answers for the type as a whole.
    fn authorize_any(
        &self,
        context: &RequestContext,
        resource_type: ResourceType,
        operation: AclOperation,
    ) -> RResult<Decision, PluginError>;

    /// The bindings `filter` selects, sorted. [`crate::ErrorKind::Unsupported`] from an
    /// authorizer that keeps no ACLs.
    fn acls(&self, filter: &AclBindingFilter) -> RResult<RVec<AclBinding>, PluginError>;

    /// Creates `bindings` durably (all that succeed are durable when this returns); one
    /// result per binding, in order. `Unsupported` from an authorizer without ACLs;
    /// `Unavailable` when its store cannot be reached (nothing created).
    fn create_acls(
        &self,
        bindings: RVec<AclBinding>,
    ) -> RResult<RVec<AclCreateResult>, PluginError>;

    /// Deletes the bindings each filter selects, durably; one result per filter, in
    /// order. `Unsupported` from an authorizer without ACLs.
    #[sabi(last_prefix_field)]
    fn delete_acls(
        &self,
        filters: RVec<AclBindingFilter>,
    ) -> RResult<RVec<AclDeleteResult>, PluginError>;
}

/// A shareable authorizer instance.
pub type AuthorizerArc = RArc<Authorizer_TO<'static, RBox<()>>>;

/// Root module of an authorizer plugin.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = AuthorizerModRef)))]
pub struct AuthorizerMod {
    /// What the plugin is; `kind` is [`crate::manifest::KindId::AUTHORIZER`].
    pub manifest: OpenManifest,
    /// Creates an instance with the host's services and the plugin's config (in cluster
    /// mode with the broker's ZooKeeper session, where an authorizer keeps shared
    /// ACLs). Errors: [`crate::ErrorKind::InvalidConfig`],
    /// [`crate::ErrorKind::Unavailable`] (its store cannot be read).
    #[sabi(last_prefix_field)]
    pub new: extern "C" fn(HostServices) -> RResult<AuthorizerArc, PluginError>,
}

impl RootModule for AuthorizerModRef {
    declare_root_module_statics! {AuthorizerModRef}
    const BASE_NAME: &'static str = "drover_authorizer";
    const NAME: &'static str = "drover_authorizer";
    const VERSION_STRINGS: VersionStrings = crate::version::AUTHORIZER_VERSION_STRINGS;
}

/// The name of the cluster resource (Kafka's `kafka-cluster`).
pub const CLUSTER_RESOURCE_NAME: &str = "kafka-cluster";

/// The wildcard: as a literal resource name, every resource of the type; as a principal
/// (`User:*`) every principal; as a host, every host.
pub const WILDCARD: &str = "*";
