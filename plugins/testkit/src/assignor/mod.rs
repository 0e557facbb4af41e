//! The assignor suite: the contract of [`drover_abi::assignor`] over proptest-generated
//! groups, determinism, and the balance and stickiness the caller claims.
//!
//! Properties, in the order [`run`] checks them (the names reports use):
//!
//! | property | what |
//! |---|---|
//! | `contract` | for any valid group: every partition of a subscribed topic to exactly one subscriber; no unknown topic or out-of-range partition; every member exactly once |
//! | `sorted_output` | members by id, topics by name, partitions strictly ascending, no empty entry |
//! | `empty_group` | no members: an empty assignment |
//! | `refuses_duplicate_member` | two members with one id: `InvalidInput` |
//! | `refuses_duplicate_topic` | a topic listed twice in `topics`: `InvalidInput` |
//! | `deterministic` | the same input twice: the same output |
//! | `member_order_independent` | members listed in another order: the same output |
//! | `context_contract` | `assign_with_context` (assignor ABI 3.1) with a generated context (labels, leaders and racks, offsets, rates; [`GeneratedContext`]): the contract, sorted output, deterministic |
//! | `empty_context_is_assign` | `assign_with_context` with an empty context: what `assign` gives (an assignor built against 3.0 passes by the ABI's default) |
//! | `balanced` | claim [`Claim::Balanced`] |
//! | `sticky` | claim [`Claim::Sticky`] |
//!
//! A share assignor (assignor ABI 3.3, for share groups) passes [`share::run`] too.
//!
//! An author's test, with the type in-process:
//!
//! ```no_run
//! # struct Mine;
//! # impl drover_abi::sdk::PluginInfo for Mine {
//! #     const NAME: &'static str = "mine"; const VERSION: &'static str = "0";
//! #     const DESCRIPTION: &'static str = "";
//! # }
//! # impl drover_abi::sdk::AssignorPlugin for Mine {
//! #     fn new(_: &drover_abi::sdk::PluginContext) -> Result<Self, drover_abi::PluginError> { Ok(Mine) }
//! #     fn assign(&self, _: &drover_abi::AssignInput) -> Result<drover_abi::Assignment, drover_abi::PluginError> { Err(drover_abi::PluginError::internal("your policy here")) }
//! # }
//! use drover_plugin_testkit::assignor::{self, Claim, Claims, Options};
//!
//! let instance = drover_abi::sdk::in_process::assignor::<Mine>("").unwrap();
//! assignor::run(&instance, &Options::new(Claims::none().with(Claim::Balanced))).assert_passed();
//! ```

pub mod builders;
mod claims;
mod context;
pub mod context_builder;
pub mod contract;
pub mod generate;
mod props;
pub mod share;

pub use claims::{Claim, ClaimError, Claims};
pub use context::GeneratedContext;
pub use context_builder::{ContextBuilder, PartitionEntry};

use drover_abi::assignor::AssignorArc;

use crate::Report;

/// How to run the suite.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// What the assignor claims beyond the contract; unclaimed properties are skipped.
    pub claims: Claims,
    /// Generated inputs per property (proptest's `cases`); 64 by default.
    pub cases: u32,
}

impl Options {
    /// The default number of cases with `claims`.
    pub fn new(claims: Claims) -> Options {
        Options { claims, cases: 64 }
    }

    /// These options with `cases` generated inputs per property.
    pub fn cases(mut self, cases: u32) -> Options {
        self.cases = cases;
        self
    }
}

impl Default for Options {
    fn default() -> Self {
        Options::new(Claims::none())
    }
}

/// Runs every property against `assignor` (an instance from a loaded `.so` or from
/// [`drover_abi::sdk::in_process::assignor`]) and reports each. A plugin that panics is
/// out of service afterwards (the SDK's guard), so the properties after it fail too.
pub fn run(assignor: &AssignorArc, options: &Options) -> Report {
    props::run(assignor, options)
}
