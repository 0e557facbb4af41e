//! The authorizer suite: the contract of [`drover_abi::authorizer`].
//!
//! Properties, in the order [`run`] checks them (the names reports use):
//!
//! | property | what |
//! |---|---|
//! | `one_decision_per_action` | 0, 1, 3 and 120 actions (every known resource type and operation): exactly that many decisions, no error |
//! | `in_order` | generated lists of actions: the decisions of a list are those of each action asked alone, in the list's order |
//! | `deterministic` | the same context and actions asked twice, and `authorize_any` asked twice: the same answers |
//! | `denies_unknown_codes` | for the ordinary principal, an action whose operation, resource type or pattern type is a code the ABI does not define, or a value only filters use (UNKNOWN, ANY, MATCH), is DENIED; so is `authorize_any` with such a type or operation. Where the authorizer keeps ACLs, the principal is first given an ALLOW of every operation on the resources asked about, so the denial is not the default one |
//! | `super_user` | needs [`Options::super_user`]: every known operation on every known resource type ALLOWED, through `authorize` and `authorize_any`; where the authorizer keeps ACLs, also while a DENY of every operation on every topic names that principal |
//! | `acl_round_trip` | `create_acls` gives one result per binding, none refused; `acls` returns them, sorted; `delete_acls` gives one result per filter, naming what it deleted; `acls` no longer returns them |
//! | `deny_beats_allow` | an ALLOW of READ on a literal topic allows it; a DENY that matches too — the same literal, a prefix of the name, the `*` name, the principal `User:*` — denies it, whichever was created first; once the DENY is deleted it is allowed again |
//!
//! The last two, and the ACL steps of the others, run only for an authorizer that keeps
//! ACLs: one whose `acls` answers [`drover_abi::ErrorKind::Unsupported`] has them
//! skipped (reported as `SKIP … keeps no ACLs`). Every ACL the suite creates names
//! resources under a prefix unique to the run (`testkit-<time>-<pid>`), and is deleted
//! again, so the suite can run against an authorizer that holds other ACLs.
//!
//! The suite cannot know an authorizer's config format, so it cannot make a principal a
//! super user itself: the caller passes one its config already makes a super user
//! ([`Options::super_user`]; `drover plugins test --super-user`), and an ordinary
//! principal the config leaves ordinary ([`Options::principal`]). What a super user is
//! answered for an unknown code is the authorizer's choice (Kafka's StandardAuthorizer
//! allows super users before it looks at the action); the suite asks about unknown codes
//! only for the ordinary principal.
//!
//! An author's test, with the type in-process:
//!
//! ```no_run
//! # struct Mine;
//! # impl drover_abi::sdk::PluginInfo for Mine {
//! #     const NAME: &'static str = "mine"; const VERSION: &'static str = "0";
//! #     const DESCRIPTION: &'static str = "";
//! # }
//! # impl drover_abi::sdk::AuthorizerPlugin for Mine {
//! #     fn new(_: &drover_abi::sdk::PluginContext) -> Result<Self, drover_abi::PluginError> { Ok(Mine) }
//! #     fn authorize(&self, _: &drover_abi::authorizer::RequestContext, a: &[drover_abi::authorizer::Action]) -> Result<Vec<drover_abi::authorizer::Decision>, drover_abi::PluginError> { Ok(vec![drover_abi::authorizer::Decision::DENIED; a.len()]) }
//! # }
//! use drover_plugin_testkit::authorizer::{self, Options};
//!
//! let instance = drover_abi::sdk::in_process::authorizer::<Mine>("super_users = [\"User:admin\"]").unwrap();
//! authorizer::run(&instance, &Options::default().super_user("User:admin")).assert_passed();
//! ```

mod props;

pub use props::{action, context};

use drover_abi::authorizer::AuthorizerArc;

use crate::Report;

/// The principal the suite asks for when the caller names none.
pub const DEFAULT_PRINCIPAL: &str = "User:drover-testkit";

/// How to run the suite.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// A principal the authorizer's config makes a super user (`User:admin`); `None`
    /// skips `super_user`.
    pub super_user: Option<String>,
    /// An ordinary principal: one the config does not make a super user (and, for an
    /// authorizer without ACLs, one it does not allow everything).
    /// [`DEFAULT_PRINCIPAL`] by default.
    pub principal: String,
    /// Generated action lists per property (proptest's `cases`); 64 by default.
    pub cases: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            super_user: None,
            principal: DEFAULT_PRINCIPAL.to_owned(),
            cases: 64,
        }
    }
}

impl Options {
    /// These options with `principal` as the super user the config makes.
    pub fn super_user(mut self, principal: impl Into<String>) -> Options {
        self.super_user = Some(principal.into());
        self
    }

    /// These options with `principal` as the ordinary principal.
    pub fn principal(mut self, principal: impl Into<String>) -> Options {
        self.principal = principal.into();
        self
    }

    /// These options with `cases` generated lists per property.
    pub fn cases(mut self, cases: u32) -> Options {
        self.cases = cases;
        self
    }
}

/// Runs every property (see the module docs) against `authorizer`, an instance from a
/// loaded `.so` or from [`drover_abi::sdk::in_process::authorizer`]. An authorizer
/// that panics is out of service afterwards (the SDK's guard), so the properties after
/// it fail too.
pub fn run(authorizer: &AuthorizerArc, options: &Options) -> Report {
    props::run(authorizer, options)
}
