//! Where a panic is reported when a plugin runs in-process (an author's `cargo test`):
//! a panic inside a plugin call goes to the SDK's log bridge (and becomes a `Panicked`
//! error), any other panic of the test binary — a failed assertion, a conformance
//! suite's failure — to the panic hook that was installed before the plugin, so the test
//! fails with its plain message rather than a log line. One test in its own binary: the
//! panic hook is the process's.

use std::{
    panic,
    sync::{Arc, Mutex},
};

use drover_abi::{
    sdk::{in_process, AssignorPlugin, PluginContext, PluginInfo},
    AssignInput, Assignment, ErrorKind, PluginError,
};

/// Panics in every `assign`.
struct Panicky;

impl PluginInfo for Panicky {
    const NAME: &'static str = "panicky";
    const VERSION: &'static str = "0.0.0";
    const DESCRIPTION: &'static str = "panics in assign";
}

impl AssignorPlugin for Panicky {
    fn new(_: &PluginContext) -> Result<Self, PluginError> {
        Ok(Panicky)
    }

    fn assign(&self, _: &AssignInput) -> Result<Assignment, PluginError> {
        panic!("the plugin's own panic")
    }
}

#[test]
fn panics_outside_plugin_calls_reach_the_previous_hook() {
    // The hook a test binary has before any plugin: it records what reaches it.
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = Arc::clone(&seen);
    panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        record.lock().unwrap().push(message);
    }));

    // Instantiating installs the log bridge (and its panic hook).
    let instance = in_process::assignor::<Panicky>("").unwrap();
    let input = AssignInput {
        group: "g".into(),
        members: Default::default(),
        topics: Default::default(),
    };
    let err = instance.assign(&input).into_result().unwrap_err();
    assert_eq!(err.kind, ErrorKind::Panicked, "{err}");
    assert!(
        seen.lock().unwrap().is_empty(),
        "a panic inside a plugin call is the bridge's to log: {:?}",
        seen.lock().unwrap()
    );

    let caught = panic::catch_unwind(|| panic!("assignor conformance suite: 1 failed (contract)"));
    assert!(caught.is_err());
    let _ = panic::take_hook();
    assert_eq!(
        *seen.lock().unwrap(),
        ["assignor conformance suite: 1 failed (contract)"],
        "a panic outside plugin calls reaches the hook installed before the plugin"
    );
}
