//! The committing child of the offset-store conformance suite's crash-safety check:
//! loads an offset-store plugin with the host's loader, opens it and runs the test
//! kit's `offset_store::crash::commit_until_killed` (one line per acknowledged batch
//! on stdout) until the suite kills it with SIGKILL.
//!
//! Usage: `drover-commit-load PLUGIN.so CACHE_DIR CONFIG_TOML GROUP KEYS`
//! Stops by itself after 60 s.

use std::{path::PathBuf, time::Duration};

use drover_abi::PluginKind;
use drover_host::plugins::{Loader, LoaderOptions};
use drover_plugin_testkit::offset_store::crash::commit_until_killed;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, plugin, cache, config, group, keys] = &args[..] else {
        eprintln!("usage: drover-commit-load PLUGIN.so CACHE_DIR CONFIG_TOML GROUP KEYS");
        std::process::exit(2);
    };
    let keys: i32 = keys.parse().expect("KEYS is a number");
    let loader = Loader::new(LoaderOptions {
        cache_dir: PathBuf::from(cache),
        allowlist: Default::default(),
    });
    let plugin = loader
        .load(
            PathBuf::from(plugin).as_path(),
            Some(PluginKind::OffsetStore),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let store = plugin
        .open_offset_store(config)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut stdout = std::io::stdout().lock();
    commit_until_killed(
        &store.instance(),
        group,
        keys,
        &mut stdout,
        Duration::from_secs(60),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}
