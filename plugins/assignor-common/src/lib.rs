//! Shared code of Drover's built-in assignor plugins (`range`, `round-robin`, `sticky`).
//!
//! A policy never works on the raw [`AssignInput`]: [`GroupView::new`] validates it
//! (duplicate member ids or topic names are rejected) and normalises it into an indexed
//! view — members sorted by id, subscribed topics sorted by name, every partition of a
//! subscribed topic numbered by a dense *global partition id* (`u32`) in (topic,
//! partition) order. A policy then only fills an owner table (`owners[global id] =
//! member index`) and [`GroupView::build`] turns it into the sorted [`Assignment`] the
//! contract in [`drover_abi::assignor`] asks for. [`run`] chains the three steps.

mod config;
mod output;
mod owned;
mod view;

#[cfg(feature = "testing")]
pub mod testing;

pub use config::expect_no_config;
pub use view::{GroupView, MemberView, TopicView};

use std::time::Instant;

use drover_abi::{AssignInput, Assignment, PluginError};

/// Owner-table value of a partition no member holds (yet).
pub const NO_OWNER: u32 = u32::MAX;

/// Validates `input` into a [`GroupView`] (logging one debug line per call, named
/// after `plugin`), lets `policy` fill the owner table (one
/// member index per global partition id) and builds the assignment from it.
///
/// Errors: [`drover_abi::ErrorKind::InvalidInput`] when the input is rejected,
/// [`drover_abi::ErrorKind::Internal`] when the policy's table is not a complete
/// assignment.
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
