//! The demo's summary and verdict.

use std::{collections::BTreeMap, time::Instant};

use super::{input::Line, Watch, PARTITIONS};

/// One rebalance: what triggered it, when, and when every live consumer held the new
/// generation's complete assignment.
#[derive(Debug, Clone)]
pub struct Rebalance {
    /// The trigger.
    pub trigger: &'static str,
    /// When it was triggered.
    pub started: Instant,
    /// The generation in force before it (if any).
    pub generation: Option<i32>,
    /// When it completed, and the new generation.
    pub completed: Option<(Instant, i32)>,
}

impl Rebalance {
    pub(crate) fn new(trigger: &'static str) -> Rebalance {
        Rebalance {
            trigger,
            started: Instant::now(),
            generation: None,
            completed: None,
        }
    }

    pub(crate) fn complete(&mut self, generation: i32, at: Instant) {
        self.completed = Some((at, generation));
    }
}

/// The summary.
pub struct Report {
    produced: usize,
    delivered: u64,
    unique: usize,
    missing: Vec<(i32, i64)>,
    wrong: Vec<(i32, i64)>,
    duplicates: usize,
    duplicates_elsewhere: Vec<(i32, i64)>,
    victim_partitions: Vec<i32>,
    rebalances: Vec<Rebalance>,
    offsets: BTreeMap<i32, (Option<i64>, i64)>,
}

impl Report {
    pub(crate) fn build(
        watch: &Watch,
        lines: &[Line],
        offsets: BTreeMap<i32, (Option<i64>, i64)>,
        victim: Option<usize>,
    ) -> Report {
        let mut missing = Vec::new();
        let mut wrong = Vec::new();
        for (key, line) in &watch.produced {
            match watch.consumed.get(key) {
                None => missing.push(*key),
                Some((_, text)) if *text != lines[*line].text => wrong.push(*key),
                Some(_) => {}
            }
        }
        missing.sort_unstable();
        wrong.sort_unstable();
        let mut duplicates = 0;
        let mut duplicates_elsewhere = Vec::new();
        for (key, (count, _)) in &watch.consumed {
            if *count > 1 {
                duplicates += (*count - 1) as usize;
                if victim.is_none() || !watch.victim_partitions.contains(&key.0) {
                    duplicates_elsewhere.push(*key);
                }
            }
        }
        duplicates_elsewhere.sort_unstable();
        Report {
            produced: watch.produced.len(),
            delivered: watch.per_consumer.iter().sum(),
            unique: watch.consumed.len(),
            missing,
            wrong,
            duplicates,
            duplicates_elsewhere,
            victim_partitions: watch.victim_partitions.iter().copied().collect(),
            rebalances: watch.rebalances.clone(),
            offsets,
        }
    }

    /// Whether the run is correct: nothing missing or altered, duplicates only where
    /// the kill allows them, committed offsets at the log end.
    pub fn ok(&self) -> bool {
        self.missing.is_empty()
            && self.wrong.is_empty()
            && self.duplicates_elsewhere.is_empty()
            && self.offsets.len() == PARTITIONS as usize
            && self
                .offsets
                .values()
                .all(|(committed, end)| *committed == Some(*end))
    }

    /// Prints the summary.
    pub fn print(&self) {
        println!();
        println!("== summary");
        println!("produced            {}", self.produced);
        println!(
            "consumed            {} deliveries, {} distinct messages",
            self.delivered, self.unique
        );
        println!(
            "duplicates          {} (allowed only on the killed consumer's partitions {:?}: \
             at-least-once redelivery after its last commit){}",
            self.duplicates,
            self.victim_partitions,
            if self.duplicates_elsewhere.is_empty() {
                String::new()
            } else {
                format!(
                    "; NOT ALLOWED on {} message(s), first {:?}",
                    self.duplicates_elsewhere.len(),
                    &self.duplicates_elsewhere[..self.duplicates_elsewhere.len().min(5)]
                )
            }
        );
        println!(
            "missing             {}{}",
            self.missing.len(),
            if self.missing.is_empty() {
                String::new()
            } else {
                format!(" — first {:?}", &self.missing[..self.missing.len().min(5)])
            }
        );
        if !self.wrong.is_empty() {
            println!(
                "altered             {} — first {:?}",
                self.wrong.len(),
                &self.wrong[..self.wrong.len().min(5)]
            );
        }
        println!("rebalances:");
        for r in &self.rebalances {
            match r.completed {
                Some((at, g)) => println!(
                    "  {:<32} -> generation {g} in {:.0} ms",
                    r.trigger,
                    (at - r.started).as_secs_f64() * 1e3
                ),
                None => println!("  {:<32} -> did not complete", r.trigger),
            }
        }
        println!("committed offsets vs log end offsets:");
        for (partition, (committed, end)) in &self.offsets {
            let committed = committed.map_or_else(|| "none".to_owned(), |c| c.to_string());
            let mark = if committed == end.to_string() {
                "ok"
            } else {
                "MISMATCH"
            };
            println!("  partition {partition}: committed {committed:>6}  log end {end:>6}  {mark}");
        }
        println!(
            "{}",
            if self.ok() {
                "result: OK — every line delivered, committed offsets at the log end"
            } else {
                "result: FAILED"
            }
        );
    }
}
