//! The offset-store conformance suite (`drover-plugin-testkit`) against every built
//! offset-store plugin through its loaded `.so` (round trip, batches, groups, scan
//! paging over a 100,000-offset batch, 8 concurrent committers, close, reopen, share-group
//! state), and
//! crash safety: no acknowledged commit lost when the committing process
//! (`drover-commit-load`) is killed with SIGKILL.

use std::process::Command;

use drover_abi::{offset_store::OffsetStoreArc, PluginError, PluginKind};
use drover_host::plugins::{LoadError, LoadedPlugin};
use drover_plugin_testkit::{
    offset_store::{self, crash, Options},
    Verdict,
};
use drover_tests::{store_config, PluginDir, OFFSET_STORES};

/// Loads the built store `lib` into `dir`; returns the plugin and its file.
fn load(dir: &PluginDir, lib: &str) -> (LoadedPlugin, std::path::PathBuf) {
    let path = dir.add_built(lib);
    let plugin = dir
        .loader()
        .load(&path, Some(PluginKind::OffsetStore))
        .unwrap_or_else(|e| panic!("{e}"));
    (plugin, path)
}

fn open(plugin: &LoadedPlugin, config: &str) -> Result<OffsetStoreArc, PluginError> {
    match plugin.open_offset_store(config) {
        Ok(handle) => Ok(handle.instance()),
        Err(LoadError::Instantiate { error, .. }) => Err(error),
        Err(e) => Err(PluginError::internal(e.to_string())),
    }
}

#[test]
fn every_store_passes_the_testkit_suite() {
    for (lib, name) in OFFSET_STORES {
        let dir = PluginDir::new();
        let config = store_config(name, &dir);
        let (plugin, _) = load(&dir, lib);
        let report = offset_store::run(&|| open(&plugin, &config), &Options::default());
        assert!(report.passed(), "{name}:\n{report}");
        // Every built-in store keeps share-group state (offset-store ABI 3.2): run, not
        // skipped.
        for property in ["share_state", "share_state_reopen"] {
            assert_eq!(
                report.verdict(property),
                Some(&Verdict::Pass),
                "{name}: {property}\n{report}"
            );
        }
    }
}

#[test]
fn no_acknowledged_commit_is_lost_on_sigkill() {
    for (lib, name) in OFFSET_STORES {
        let dir = PluginDir::new();
        let config = store_config(name, &dir);
        let (plugin, path) = load(&dir, lib);
        let group = format!("{}-crash", offset_store::unique_prefix());
        let mut child = Command::new(env!("CARGO_BIN_EXE_drover-commit-load"));
        child
            .arg(&path)
            .arg(dir.scratch("child-cache"))
            .arg(&config)
            .arg(&group)
            .arg("16");
        let result = crash::crash_safety(&mut child, &|| open(&plugin, &config), &group, 16, 300);
        assert_eq!(result, Ok(()), "{name}");
    }
}
