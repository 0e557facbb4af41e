//! docs/operations.md against the code, so neither drifts silently (issue 27):
//!
//! - **configuration keys**: every key `drover.toml` accepts, enumerated from
//!   [`crate::config::Config`] itself, against the keys the tables of the
//!   "Configuration file" section and its `[section]` subsections list;
//! - **metrics**: every family `GET /metrics` serves (the broker's registry as
//!   [`crate::metrics::Metrics::render`] renders it, and the transaction
//!   coordinator's part, [`crate::txn::metrics::render`]), against the `drover_…` names
//!   the "Admin HTTP API" section documents.
//!
//! And `host/src/lib.rs`'s module list: every public module is named in the crate's
//! docs.
//!
//! Each failure names what is missing on which side. Keys are enumerated without a
//! list kept by hand: every table of the configuration is a serde struct with
//! `deny_unknown_fields`, so deserialising an unknown key into it fails with serde's
//! "unknown field `…`, expected one of `a`, `b`, …" — the struct's own field names, as
//! the file spells them. A field whose table takes any key (a map, such as
//! `plugins.config`) or is not a table at all ends the walk.

use std::collections::BTreeSet;

use crate::config::Config;

/// docs/operations.md.
fn operations_md() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/operations.md");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// What the configuration makes of a table at dotted `path` holding one unknown key.
enum Probe {
    /// A struct: its fields.
    Fields(Vec<String>),
    /// Accepted: a table of any keys (a map).
    AnyKey,
    /// Refused for another reason: not a table.
    NotATable,
}

const PROBE_KEY: &str = "drover_docs_drift_probe";

fn probe(path: &[String]) -> Probe {
    let mut text = String::new();
    if !path.is_empty() {
        text.push_str(&format!("[{}]\n", path.join(".")));
    }
    text.push_str(&format!("{PROBE_KEY} = 0\n"));
    let err = match toml::from_str::<Config>(&text) {
        Ok(_) => return Probe::AnyKey,
        Err(e) => e.to_string(),
    };
    if !err.contains(&format!("unknown field `{PROBE_KEY}`")) {
        return Probe::NotATable;
    }
    // After the unknown field: "expected one of `a`, `b`, `c`", "expected `a` or `b`",
    // "expected `a`", or "there are no fields": the names are the quoted words.
    let after = err
        .split(&format!("unknown field `{PROBE_KEY}`"))
        .nth(1)
        .unwrap_or_default();
    let list = after.lines().next().unwrap_or_default();
    Probe::Fields(
        list.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect(),
    )
}

/// Every key of the configuration file, dotted (`server.listen`); a table of any keys
/// as its own name (`plugins.config`).
fn config_keys() -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut stack = vec![Vec::<String>::new()];
    while let Some(path) = stack.pop() {
        match probe(&path) {
            Probe::Fields(fields) => {
                assert!(
                    !fields.is_empty(),
                    "no fields read for [{}]; serde's message changed?",
                    path.join(".")
                );
                for field in fields {
                    let mut child = path.clone();
                    child.push(field);
                    stack.push(child);
                }
            }
            Probe::AnyKey | Probe::NotATable => {
                keys.insert(path.join("."));
            }
        }
    }
    keys
}

/// The keys the configuration tables of docs/operations.md list, dotted: the rows of
/// the tables under "Configuration file" (keys written in full, `plugins.config.<name>`
/// read as `plugins.config`) and under each heading naming a `[section]` (keys of that
/// section).
fn documented_keys(doc: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    // None: not a configuration heading; Some(""): top level; Some("server"): [server].
    let mut section: Option<String> = None;
    for line in doc.lines() {
        if line.starts_with('#') {
            section = if line.starts_with("## Configuration file") {
                Some(String::new())
            } else {
                line.split_once("[")
                    .and_then(|(_, rest)| rest.split_once(']'))
                    .map(|(name, _)| name.to_owned())
                    .filter(|name| name.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
                    .filter(|name| !name.is_empty())
            };
            continue;
        }
        let Some(section) = &section else { continue };
        let Some(key) = line
            .strip_prefix("| `")
            .and_then(|rest| rest.split_once('`'))
            .map(|(key, _)| key)
        else {
            continue;
        };
        let key = key.split(".<").next().unwrap_or(key);
        keys.insert(if section.is_empty() {
            key.to_owned()
        } else {
            format!("{section}.{key}")
        });
    }
    keys
}

/// One line per side: what the code has that the docs lack, and the other way round.
fn differences(code: &BTreeSet<String>, doc: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    let undocumented: Vec<&String> = code.difference(doc).collect();
    if !undocumented.is_empty() {
        out.push(format!(
            "in the code, missing from docs/operations.md: {undocumented:?}"
        ));
    }
    let unknown: Vec<&String> = doc.difference(code).collect();
    if !unknown.is_empty() {
        out.push(format!(
            "in docs/operations.md, not in the code: {unknown:?}"
        ));
    }
    out
}

#[test]
fn every_config_key_is_documented_and_every_documented_key_exists() {
    let code = config_keys();
    // The walk reaches every table: a few keys of each, as a check on the walk itself.
    for key in [
        "data_dir",
        "plugins.config",
        "server.listen",
        "log.segment_bytes",
        "coordinator.assignor_timeout_ms",
        "zookeeper.connect",
        "transactions.max_transactional_ids",
    ] {
        assert!(
            code.contains(key),
            "{key} not found in the code's keys: {code:?}"
        );
    }
    let doc = documented_keys(&operations_md());
    let diff = differences(&code, &doc);
    assert!(
        diff.is_empty(),
        "the configuration keys of docs/operations.md (\"Configuration file\" and its \
         `[section]` tables) and host/src/config.rs differ:\n{}",
        diff.join("\n")
    );
}

/// The metric names a scrape shows, as clients query them: counters with `_total`.
fn metric_names() -> BTreeSet<String> {
    let dir = tempfile::tempdir().unwrap();
    let limits = crate::config::TransactionsSection::default().limits();
    let txn = crate::txn::TxnCoordinator::open(dir.path(), limits).unwrap();
    let mut text = crate::metrics::Metrics::new().render(&[("t".into(), 0, 1, 1)]);
    text.push_str(&crate::txn::metrics::render(&txn));
    text.push_str(&crate::share::metrics::render(
        &[],
        &drover_share::ShareCounters::default(),
        0,
    ));
    text.lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .map(|rest| {
            let mut parts = rest.split_whitespace();
            let name = parts.next().unwrap_or_default();
            match parts.next() {
                Some("counter") => format!("{name}_total"),
                _ => name.to_owned(),
            }
        })
        .collect()
}

/// The `drover_…` names in the "Admin HTTP API" section (Rust paths such as
/// `drover_abi::…` excepted).
fn documented_metrics(doc: &str) -> BTreeSet<String> {
    let start = doc
        .find("### Admin HTTP API")
        .expect("docs/operations.md has an \"Admin HTTP API\" section");
    let section = &doc[start..];
    let end = section[3..].find("\n#").map_or(section.len(), |i| i + 3);
    let section = &section[..end];
    let mut names = BTreeSet::new();
    for (at, _) in section.match_indices("drover_") {
        let rest = &section[at..];
        let len = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(rest.len());
        let preceded_by_word = section[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        if !rest[len..].starts_with("::") && !preceded_by_word {
            names.insert(rest[..len].to_owned());
        }
    }
    names
}

#[test]
fn every_metric_is_documented_and_every_documented_metric_exists() {
    let code = metric_names();
    for name in [
        "drover_requests_total",
        "drover_log_end_offset",
        "drover_coordinator_events_total",
        "drover_transactions",
        "drover_init_producer_id_throttled_total",
    ] {
        assert!(code.contains(name), "{name} not rendered: {code:?}");
    }
    let doc = documented_metrics(&operations_md());
    let diff = differences(&code, &doc);
    assert!(
        diff.is_empty(),
        "the metrics of docs/operations.md (\"Admin HTTP API\") and GET /metrics \
         (host/src/metrics.rs, host/src/txn/metrics.rs) differ:\n{}",
        diff.join("\n")
    );
}

#[test]
fn the_doc_readers_find_what_a_table_lists() {
    let doc = "## Configuration file (`drover.toml`)\n\n| key | x |\n|---|---|\n\
               | `data_dir` | p |\n| `plugins.config.<name>` | t |\n\n### `[server]`\n\n\
               | `listen` | a |\n\n#### Open files\n\n| `not_a_key` | b |\n\n\
               ### Cluster mode (`[zookeeper]`)\n| `connect` | c |\n\n\
               ### Admin HTTP API\n`drover_requests_total{api}`, `drover_abi::x`, \
               libdrover_x.so\n## Next\n`drover_elsewhere`\n";
    assert_eq!(
        documented_keys(doc).into_iter().collect::<Vec<_>>(),
        [
            "data_dir",
            "plugins.config",
            "server.listen",
            "zookeeper.connect"
        ]
    );
    assert_eq!(
        documented_metrics(doc).into_iter().collect::<Vec<_>>(),
        ["drover_requests_total"]
    );
    let code: BTreeSet<String> = ["a".into(), "b".into()].into();
    let docs: BTreeSet<String> = ["b".into(), "c".into()].into();
    assert_eq!(
        differences(&code, &docs),
        [
            "in the code, missing from docs/operations.md: [\"a\"]",
            "in docs/operations.md, not in the code: [\"c\"]"
        ]
    );
}

#[test]
fn the_crate_docs_name_every_public_module() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs");
    let lib = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let docs: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';'))
        .collect();
    assert!(modules.contains(&"txn"), "{modules:?}");
    let unnamed: Vec<&&str> = modules
        .iter()
        .filter(|m| !docs.contains(&format!("[`{m}`]")))
        .collect();
    assert!(
        unnamed.is_empty(),
        "host/src/lib.rs: public modules its docs do not list (as [`name`]): {unnamed:?}"
    );
}
