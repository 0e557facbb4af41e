//! The result of a suite run: one verdict per property, in the order they ran.

use std::fmt;

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
    /// One entry per property, in the order they ran.
    pub outcomes: Vec<Outcome>,
}

impl Report {
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

    /// Panics, listing every failed property, unless all passed: the one line an
    /// author's `#[test]` needs.
    #[track_caller]
    pub fn assert_passed(&self) {
        if !self.passed() {
            let lines: Vec<String> = self.failures().map(Outcome::to_string).collect();
            panic!("conformance suite failed:\n{}", lines.join("\n"));
        }
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
}
