//! Properties over generated inputs, shared by the suites.

use proptest::{
    strategy::Strategy,
    test_runner::{Config, TestCaseError, TestError, TestRunner},
};

/// Runs `property` over `cases` inputs of `strategy`; on failure, the reason for the
/// smallest failing input proptest found, and that input (`describe`d).
pub(crate) fn check<S>(
    cases: u32,
    strategy: S,
    describe: impl Fn(&S::Value) -> String,
    property: impl Fn(&S::Value) -> Result<(), String>,
) -> Result<(), String>
where
    S: Strategy,
{
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        // The nested group strategies shrink slowly; allow more steps than the 256
        // default so a failure names a small input.
        max_shrink_iters: 4096,
        ..Config::default()
    });
    match runner.run(&strategy, |value| {
        property(&value).map_err(TestCaseError::fail)
    }) {
        Ok(()) => Ok(()),
        Err(TestError::Fail(why, value)) => Err(format!("{why}; input: {}", describe(&value))),
        Err(TestError::Abort(why)) => Err(format!("gave up: {why}")),
    }
}
