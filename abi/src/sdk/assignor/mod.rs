//! Helpers for writing an assignor: validate the input once, write the policy as an
//! owner table, get the sorted [`Assignment`] the contract asks for.
//!
//! A policy never works on the raw [`AssignInput`]: [`GroupView::new`] validates it
//! (duplicate member ids, or a topic listed twice in [`AssignInput::topics`], are
//! refused with [`crate::ErrorKind::InvalidInput`]) and normalises it into an indexed
//! view — members sorted by id, subscribed topics sorted by name, every partition of a
//! subscribed topic numbered by a dense *global partition id* (`u32`) in (topic,
//! partition) order. A policy then only fills an owner table (`owners[global id] =
//! member index`) and [`GroupView::build`] turns it into the [`Assignment`] the contract
//! in [`crate::assignor`] asks for (members by id, topics by name, partitions
//! ascending). [`run`] chains the three steps:
//!
//! ```
//! use drover_abi::{sdk::assignor::{run, GroupView}, AssignInput, Assignment, PluginError};
//!
//! /// Every partition to the first subscriber of its topic (in member-id order).
//! fn assign(input: &AssignInput) -> Result<Assignment, PluginError> {
//!     run("first", input, |view: &GroupView<'_>| {
//!         let mut owners = Vec::with_capacity(view.partition_count());
//!         for topic in view.topics() {
//!             owners.extend((0..topic.partitions).map(|_| topic.subscribers[0]));
//!         }
//!         owners
//!     })
//! }
//! ```
//!
//! An assignor that wants more than the input (member labels, partition leaders and
//! their racks, offsets, produce rates: assignor ABI 3.1) overrides
//! [`AssignorPlugin::assign_with_context`](crate::sdk::AssignorPlugin::assign_with_context)
//! and reads the [`Context`] it receives from its policy closure; every value there is
//! optional.
//!
//! A share assignor (assignor ABI 3.3: a share group's partition may go to several
//! members) answers `true` from
//! [`AssignorPlugin::share_groups_supported`](crate::sdk::AssignorPlugin::share_groups_supported)
//! and implements
//! [`AssignorPlugin::assign_share`](crate::sdk::AssignorPlugin::assign_share), most
//! simply with [`run_share`], whose policy returns each partition's holders.
//!
//! The built-in assignors (`range`, `round-robin`, `sticky`) and
//! `examples/custom-assignor` are written this way.
//!
//! These helpers are part of this release of `drover-abi`, and a plugin built with it
//! declares this release's assignor ABI (3.3). A plugin for brokers serving an older
//! minor is built against that release's `drover-abi`, with that release's helpers:
//! [`run`] and [`GroupView`] since 3.1 (assignor 3.0); [`Context`] since 3.2 (assignor
//! 3.1); [`Racks`] since 3.3; [`Context::partition_data_age_ms`], an unknown rather than
//! clamped [`Context::lag`], [`MemberView::rack`]/[`MemberView::weight`] and lookups
//! taking a `u32` since 3.5 (assignor 3.2); [`run_share`] and
//! [`GroupView::build_share`] since 3.9 (assignor 3.3). docs/plugins.md, "Targeting an older
//! broker", says what each costs.

mod config;
mod context;
mod output;
mod owned;
mod racks;
mod view;

pub use config::expect_no_config;
pub use context::Context;
pub use racks::Racks;
pub use view::{GroupView, MemberView, TopicView};

use std::time::Instant;

use crate::{AssignInput, Assignment, PluginError};

/// [`run`] for a share group (assignor ABI 3.3, the share-assignor contract in
/// [`crate::assignor`]): validates `input` into a [`GroupView`], lets `policy` fill the
/// holder table (for each global partition id, the indices of the members it goes to,
/// at least one) and builds the assignment from it ([`GroupView::build_share`]).
///
/// Errors: as [`run`]'s; [`crate::ErrorKind::Internal`] also when a partition has no
/// holder.
pub fn run_share<F>(plugin: &str, input: &AssignInput, policy: F) -> Result<Assignment, PluginError>
where
    F: FnOnce(&GroupView<'_>) -> Vec<Vec<u32>>,
{
    let started = Instant::now();
    let view = GroupView::new(input)?;
    let holders = policy(&view);
    let assignment = view.build_share(&holders)?;
    tracing::debug!(
        group = %input.group,
        members = view.members().len(),
        partitions = view.partition_count(),
        elapsed_us = started.elapsed().as_micros() as u64,
        "{plugin} share assignment"
    );
    Ok(assignment)
}

/// Owner-table value of a partition no member holds (yet).
pub const NO_OWNER: u32 = u32::MAX;

/// Validates `input` into a [`GroupView`] (logging one debug line per call, named
/// after `plugin`), lets `policy` fill the owner table (one member index per global
/// partition id, `0..view.partition_count()`) and builds the assignment from it.
///
/// Errors: [`crate::ErrorKind::InvalidInput`] when the input is refused (see
/// [`GroupView::new`]), [`crate::ErrorKind::Internal`] when the policy's table is not a
/// complete assignment (wrong length, or an entry that names no member).
pub fn run<F>(plugin: &str, input: &AssignInput, policy: F) -> Result<Assignment, PluginError>
where
    F: FnOnce(&GroupView<'_>) -> Vec<u32>,
{
    let started = Instant::now();
    let view = GroupView::new(input)?;
    let owners = policy(&view);
    let assignment = view.build(&owners)?;
    tracing::debug!(
        group = %input.group,
        members = view.members().len(),
        partitions = view.partition_count(),
        elapsed_us = started.elapsed().as_micros() as u64,
        "{plugin} assignment"
    );
    Ok(assignment)
}
