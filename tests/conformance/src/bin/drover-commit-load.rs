//! Commits offsets through a loaded offset-store plugin in a loop and prints the
//! sequence number of every batch the store acknowledged, one per line, flushed. The
//! conformance suite runs it, kills it with SIGKILL mid-stream, and checks that every
//! acknowledged batch survived.
//!
//! Usage: `drover-commit-load PLUGIN.so CACHE_DIR CONFIG_TOML KEYS`
//! Each batch `n` (1, 2, …) writes offset `n` for KEYS keys (`crash`, `t`, 0..KEYS).
//! Stops by itself after 60 s or 1,000,000 batches.

use std::{
    io::Write,
    path::PathBuf,
    time::{Duration, Instant},
};

use drover_abi::{std_types::RString, OffsetRecord, PluginKind};
use drover_host::plugins::{Loader, LoaderOptions};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, plugin, cache, config, keys] = &args[..] else {
        eprintln!("usage: drover-commit-load PLUGIN.so CACHE_DIR CONFIG_TOML KEYS");
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
    let started = Instant::now();
    let mut stdout = std::io::stdout().lock();
    for n in 1..=1_000_000i64 {
        if started.elapsed() > Duration::from_secs(60) {
            break;
        }
        let batch: Vec<OffsetRecord> = (0..keys)
            .map(|p| OffsetRecord {
                group: RString::from("crash"),
                topic: RString::from("t"),
                partition: p,
                offset: n,
                metadata: RString::from(format!("batch {n}")),
                commit_time_ms: n,
            })
            .collect();
        store.commit(&batch).unwrap_or_else(|e| panic!("{e}"));
        writeln!(stdout, "{n}").expect("stdout");
        stdout.flush().expect("stdout");
    }
}
