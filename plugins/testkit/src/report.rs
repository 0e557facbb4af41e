//! The result of a suite run: one verdict per property, in the order they ran.
//!
//! [`Report::assert_passed`] is what an author's `#[test]` calls. What it shows, and
//! where:
//!
//! - **on success**, the suite's lines (`PASS name`, `SKIP name: why`) under a header
//!   naming the suite and the test, written straight to the process's standard error.
//!   That bypasses the test harness's output capture on purpose: a plain `cargo test`
//!   shows which properties ran and which were skipped (an unclaimed `balanced` or
//!   `sticky` is easy to miss otherwise), between the harness's `test … ok` lines. Set
//!   `DROVER_TESTKIT_REPORT=quiet` to keep successful runs silent;
//! - **on failure**, nothing extra: the test panics with a plain message naming the
//!   failed properties, each `FAIL name: why` line, and what passed and was skipped, which
//!   the harness prints under the failing test's name. (The SDK's log bridge, installed by
//!   [`drover_abi::sdk::in_process`], leaves panics outside a plugin call to the usual
//!   panic hook.)

use std::{fmt, io::Write as _};

/// The environment variable that quiets successful runs of [`Report::assert_passed`]:
/// `quiet` prints nothing on success; unset, or any other value, prints every line.
pub const REPORT_ENV: &str = "DROVER_TESTKIT_REPORT";

/// How one property came out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The property held.
    Pass,
    /// The property failed; the text says why (for generated inputs, about the
    /// smallest failing input proptest found).
    Fail(String),
    /// The property was not run; the text says why (a claim the caller did not make).
    Skip(String),
}

/// One property and its verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The property's name, as the suite's docs list it (`contract`, `reopen`, …).
    pub property: &'static str,
    /// How it came out.
    pub verdict: Verdict,
}

impl fmt::Display for Outcome {
    /// `PASS name`, `FAIL name: why` or `SKIP name: why`, on one line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.verdict {
            Verdict::Pass => write!(f, "PASS {}", self.property),
            Verdict::Fail(why) => write!(f, "FAIL {}: {}", self.property, one_line(why)),
            Verdict::Skip(why) => write!(f, "SKIP {}: {}", self.property, one_line(why)),
        }
    }
}

/// The verdicts of one suite run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Which suite ran (`assignor`, `offset-store`); empty for a report built by hand.
    pub suite: &'static str,
    /// One entry per property, in the order they ran.
    pub outcomes: Vec<Outcome>,
}

impl Report {
    /// An empty report of the suite named `suite`.
    pub fn new(suite: &'static str) -> Report {
        Report {
            suite,
            outcomes: Vec::new(),
        }
    }

    /// Records `verdict` for `property`.
    pub fn push(&mut self, property: &'static str, verdict: Verdict) {
        self.outcomes.push(Outcome { property, verdict });
    }

    /// Records the result of a check: `Ok` passes, `Err(why)` fails.
    pub fn record(&mut self, property: &'static str, result: Result<(), String>) {
        let verdict = match result {
            Ok(()) => Verdict::Pass,
            Err(why) => Verdict::Fail(why),
        };
        self.push(property, verdict);
    }

    /// The failed properties.
    pub fn failures(&self) -> impl Iterator<Item = &Outcome> {
        self.outcomes
            .iter()
            .filter(|o| matches!(o.verdict, Verdict::Fail(_)))
    }

    /// Whether no property failed (skipped ones do not count).
    pub fn passed(&self) -> bool {
        self.failures().next().is_none()
    }

    /// The verdict of `property`, if it ran or was skipped.
    pub fn verdict(&self, property: &str) -> Option<&Verdict> {
        self.outcomes
            .iter()
            .find(|o| o.property == property)
            .map(|o| &o.verdict)
    }

    /// The properties that passed, failed and were skipped, as counts.
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut counts = (0, 0, 0);
        for outcome in &self.outcomes {
            match outcome.verdict {
                Verdict::Pass => counts.0 += 1,
                Verdict::Fail(_) => counts.1 += 1,
                Verdict::Skip(_) => counts.2 += 1,
            }
        }
        counts
    }

    /// One line: the suite, and how many properties passed, failed and were skipped
    /// (`assignor conformance suite: 9 passed, 2 skipped`; the failed ones named).
    pub fn summary(&self) -> String {
        self.summary_within("")
    }

    /// [`Report::summary`] with `within` (empty, or ` (test NAME)`) after the suite.
    fn summary_within(&self, within: &str) -> String {
        let (passed, failed, skipped) = self.counts();
        let suite = if self.suite.is_empty() {
            "conformance suite".to_owned()
        } else {
            format!("{} conformance suite", self.suite)
        };
        let mut line = format!("{suite}{within}: {passed} passed");
        if failed > 0 {
            let names: Vec<&str> = self.failures().map(|o| o.property).collect();
            line.push_str(&format!(", {failed} failed ({})", names.join(", ")));
        }
        if skipped > 0 {
            line.push_str(&format!(", {skipped} skipped"));
        }
        line
    }

    /// The one line an author's `#[test]` needs. Unless every property passed (skipped
    /// ones do not count), panics with [`Report::panic_message`]: the failed
    /// properties by name, then every line. Otherwise writes the report (see the module
    /// docs) to standard error, past the test harness's capture, so `cargo test` shows
    /// what ran; `DROVER_TESTKIT_REPORT=quiet` silences that.
    #[track_caller]
    pub fn assert_passed(&self) {
        if !self.passed() {
            panic!("{}", self.panic_message());
        }
        if std::env::var(REPORT_ENV).is_ok_and(|v| v == "quiet") {
            return;
        }
        let text = self.success_text(std::thread::current().name());
        // `eprintln!` would be captured by the harness (and shown only on failure or
        // with --nocapture); a write to the stream itself is not. One write keeps the
        // block together beside other tests' output.
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }

    /// What [`Report::assert_passed`] panics with when a property failed: the summary
    /// naming the failed properties, then one line per property.
    pub fn panic_message(&self) -> String {
        format!("{}\n{}", self.summary(), self.indented())
    }

    /// What a successful [`Report::assert_passed`] prints: the summary, with the test
    /// (the harness names each test's thread after it) when there is one, then one line
    /// per property.
    fn success_text(&self, test: Option<&str>) -> String {
        let within = match test {
            Some(name) if name != "main" => format!(" (test {name})"),
            _ => String::new(),
        };
        format!("{}\n{}", self.summary_within(&within), self.indented())
    }

    /// Every line, indented by four spaces.
    fn indented(&self) -> String {
        self.outcomes.iter().map(|o| format!("    {o}\n")).collect()
    }
}

impl fmt::Display for Report {
    /// One line per property.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for outcome in &self.outcomes {
            writeln!(f, "{outcome}")?;
        }
        Ok(())
    }
}

/// `text` with line breaks folded into spaces, so a verdict stays one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_name_the_property() {
        let mut report = Report::default();
        report.record("contract", Ok(()));
        report.record("sticky", Err("moved\npartition 3".into()));
        report.push("balanced", Verdict::Skip("not claimed".into()));
        assert_eq!(
            report.to_string(),
            "PASS contract\nFAIL sticky: moved partition 3\nSKIP balanced: not claimed\n"
        );
        assert!(!report.passed());
        assert_eq!(report.failures().count(), 1);
        assert_eq!(report.verdict("contract"), Some(&Verdict::Pass));
    }

    #[test]
    fn a_failure_panics_naming_the_failed_properties() {
        let mut report = Report::new("assignor");
        report.record(
            "contract",
            Err("partition 0 of `t` given to a and b".into()),
        );
        report.record("sorted_output", Ok(()));
        report.push("sticky", Verdict::Skip("not claimed".into()));
        report.record("deterministic", Err("differs".into()));
        let panic = std::panic::catch_unwind(|| report.assert_passed()).unwrap_err();
        let message = panic.downcast_ref::<String>().expect("a formatted message");
        assert_eq!(
            message.as_str(),
            "assignor conformance suite: 1 passed, 2 failed (contract, deterministic), \
             1 skipped\n    FAIL contract: partition 0 of `t` given to a and b\n    \
             PASS sorted_output\n    SKIP sticky: not claimed\n    FAIL deterministic: \
             differs\n"
        );
    }

    #[test]
    fn a_success_lists_every_line_under_the_test_name() {
        let mut report = Report::new("offset-store");
        report.record("open", Ok(()));
        report.push(
            "crash_safety",
            Verdict::Skip("needs a child process".into()),
        );
        report.assert_passed();
        assert_eq!(
            report.success_text(Some("tests::mine")),
            "offset-store conformance suite (test tests::mine): 1 passed, 1 skipped\n    \
             PASS open\n    SKIP crash_safety: needs a child process\n"
        );
        assert_eq!(
            Report::default().success_text(Some("main")),
            "conformance suite: 0 passed\n"
        );
    }
}
