//! The transaction coordinator's part of `GET /metrics`, rendered at scrape time in
//! the Prometheus text format:
//!
//! - `drover_transactions{state}` (gauge): transactional ids per state (Kafka's state
//!   names: `Empty`, `Ongoing`, `PrepareCommit`, `PrepareAbort`, `CompleteCommit`,
//!   `CompleteAbort`);
//! - `drover_transactions_completed_total{result}`: transactions completed since
//!   startup, `commit` or `abort`;
//! - `drover_transactions_aborted_by_timeout_total`: open transactions aborted because
//!   `transaction.timeout.ms` passed;
//! - `drover_transaction_markers_written_total`: markers written (one per partition of
//!   a completed transaction);
//! - `drover_transactional_ids_expired_total`: ids removed after
//!   `transactional.id.expiration.ms` (`transactions.unused_id_expiration_ms` for ids
//!   that never opened a transaction);
//! - `drover_transactional_ids_evicted_total`: idle ids evicted for a new one at
//!   `transactions.max_transactional_ids`;
//! - `drover_init_producer_id_throttled_total`: InitProducerId calls for a new id
//!   (a new transactional id, or any call without one) refused by
//!   `transactions.new_ids_per_sec_per_client`.

use std::{fmt::Write, sync::atomic::Ordering};

use super::coordinator::TxnCoordinator;

/// The samples of `coordinator`, as Prometheus text lines (no `# EOF`).
pub fn render(coordinator: &TxnCoordinator) -> String {
    let mut out = String::new();
    let c = &coordinator.counters;
    let _ = writeln!(
        out,
        "# HELP drover_transactions Transactional ids known, by state.\n# TYPE drover_transactions gauge"
    );
    for (state, n) in coordinator.counts() {
        let _ = writeln!(out, "drover_transactions{{state=\"{}\"}} {n}", state.name());
    }
    let _ = writeln!(
        out,
        "# HELP drover_transactions_completed Transactions completed, by result.\n# TYPE drover_transactions_completed counter"
    );
    for (result, counter) in [("commit", &c.committed), ("abort", &c.aborted)] {
        let _ = writeln!(
            out,
            "drover_transactions_completed_total{{result=\"{result}\"}} {}",
            counter.load(Ordering::Relaxed)
        );
    }
    for (name, help, counter) in [
        (
            "drover_transactions_aborted_by_timeout",
            "Open transactions aborted by their timeout.",
            &c.aborted_by_timeout,
        ),
        (
            "drover_transaction_markers_written",
            "Transaction markers written, one per partition of a completed transaction.",
            &c.markers_written,
        ),
        (
            "drover_transactional_ids_expired",
            "Transactional ids removed after transactional.id.expiration.ms (or unused_id_expiration_ms).",
            &c.expired,
        ),
        (
            "drover_transactional_ids_evicted",
            "Idle transactional ids evicted for a new one at max_transactional_ids.",
            &c.evicted,
        ),
        (
            "drover_init_producer_id_throttled",
            "InitProducerId calls for a new transactional or producer id refused by new_ids_per_sec_per_client.",
            &c.throttled,
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name}_total {}",
            counter.load(Ordering::Relaxed)
        );
    }
    out
}
