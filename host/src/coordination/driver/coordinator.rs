//! What the driver needs of a coordinator: the sans-IO calls of the coordinator ABI
//! (docs/design.md, "The coordinator core is sans-IO") and whether the instance is
//! still in service. The loaded plugin ([`CoordinatorHandle`]) implements it; the
//! driver's unit tests implement it with a scripted coordinator.

use drover_abi::coordinator::{CoordinatorInput, CoordinatorOutput};
use drover_abi::version::KindVersion;

use crate::plugins::{CallError, CoordinatorHandle};

/// A coordinator the driver can run. Times are ms on the driver's monotonic clock
/// ([`crate::clock::Epoch`]). Every call returns the outputs to execute, or the
/// plugin's error (after a panic the instance is out of service).
pub trait Coordinator: Send + 'static {
    /// Feeds one input at `now_ms`.
    fn handle(
        &mut self,
        now_ms: u64,
        input: CoordinatorInput,
    ) -> Result<Vec<CoordinatorOutput>, CallError>;

    /// The next deadline (ms), at which the driver feeds `TimerFired`; `None` when
    /// nothing is due.
    fn poll_timeout(&self) -> Option<u64>;

    /// Cluster mode: this broker now owns coordinator slot `slot`, whose previous owner
    /// has not coordinated it for at least `stopped_ms` ms.
    fn slot_gained(
        &mut self,
        now_ms: u64,
        slot: u32,
        stopped_ms: u64,
    ) -> Result<Vec<CoordinatorOutput>, CallError>;

    /// Cluster mode: this broker no longer owns coordinator slot `slot`.
    fn slot_lost(&mut self, now_ms: u64, slot: u32) -> Result<Vec<CoordinatorOutput>, CallError>;

    /// The broker is stopping: the final outputs. No call follows.
    fn shutdown(&mut self, now_ms: u64) -> Result<Vec<CoordinatorOutput>, CallError>;

    /// Whether the instance was taken out of service (it panicked).
    fn is_out_of_service(&self) -> bool;

    /// The coordinator's name (the plugin's, for logs and the admin API).
    fn name(&self) -> String;

    /// The coordinator ABI version it was built against (inputs added by a later minor
    /// are not sent to it). Default: this host's.
    fn abi(&self) -> KindVersion {
        drover_abi::version::COORDINATOR_ABI
    }
}

impl Coordinator for CoordinatorHandle {
    fn handle(
        &mut self,
        now_ms: u64,
        input: CoordinatorInput,
    ) -> Result<Vec<CoordinatorOutput>, CallError> {
        CoordinatorHandle::handle(self, now_ms, input)
    }

    fn poll_timeout(&self) -> Option<u64> {
        CoordinatorHandle::poll_timeout(self)
    }

    fn slot_gained(
        &mut self,
        now_ms: u64,
        slot: u32,
        stopped_ms: u64,
    ) -> Result<Vec<CoordinatorOutput>, CallError> {
        CoordinatorHandle::slot_gained(self, now_ms, slot, stopped_ms)
    }

    fn slot_lost(&mut self, now_ms: u64, slot: u32) -> Result<Vec<CoordinatorOutput>, CallError> {
        CoordinatorHandle::slot_lost(self, now_ms, slot)
    }

    fn shutdown(&mut self, now_ms: u64) -> Result<Vec<CoordinatorOutput>, CallError> {
        CoordinatorHandle::shutdown(self, now_ms)
    }

    fn is_out_of_service(&self) -> bool {
        CoordinatorHandle::is_out_of_service(self)
    }

    fn name(&self) -> String {
        self.summary().name.clone()
    }

    fn abi(&self) -> KindVersion {
        parse_abi(&self.summary().abi).unwrap_or(drover_abi::version::COORDINATOR_ABI)
    }
}

/// `major.minor` as a plugin summary shows it ([`crate::plugins::PluginSummary::abi`]).
fn parse_abi(abi: &str) -> Option<KindVersion> {
    let (major, minor) = abi.split_once('.')?;
    Some(KindVersion {
        major: major.parse().ok()?,
        minor: minor.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_summarys_abi_parses() {
        let v = super::parse_abi("3.2").unwrap();
        assert_eq!((v.major, v.minor), (3, 2));
        assert!(super::parse_abi("3").is_none());
    }
}
