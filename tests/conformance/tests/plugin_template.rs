//! The plugin template (`templates/assignor`) builds as an outside author builds it:
//! `scripts/new-plugin.sh` copies it to a directory outside the checkout, and `cargo
//! test --offline --locked` there builds the plugin against the checkout's `abi/` and
//! `plugins/testkit` (or, with `--vendor`, against copies inside the new directory) and
//! runs its conformance test; the `.so` it builds loads through the broker's loader.
//!
//! Offline works because the template's pinned `Cargo.lock` holds only versions this
//! workspace's `Cargo.lock` holds too, so a machine that has built Drover has every
//! crate the template needs; the first test keeps it that way.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::Command,
};

use drover_abi::{std_types::RVec, AssignInput, AssignorMember, PluginKind, TopicInfo};
use drover_tests::PluginDir;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The (name, version) of every registry or git package a `Cargo.lock` pins.
fn pinned(lock: &Path) -> BTreeSet<(String, String)> {
    packages(lock, true)
}

/// The (name, version) of the packages of `lock`: registry ones (`registry`) or the
/// path ones (the template's own crate, drover-abi, the testkit).
fn packages(lock: &Path, registry: bool) -> BTreeSet<(String, String)> {
    let text = std::fs::read_to_string(lock).unwrap_or_else(|e| panic!("{lock:?}: {e}"));
    let mut out = BTreeSet::new();
    for block in text.split("[[package]]").skip(1) {
        let field = |key: &str| {
            block.lines().find_map(|l| {
                l.strip_prefix(key)
                    .and_then(|rest| rest.trim().strip_prefix("= "))
                    .map(|v| v.trim_matches('"').to_owned())
            })
        };
        if field("source").is_some() == registry {
            out.insert((field("name").unwrap(), field("version").unwrap()));
        }
    }
    out
}

#[test]
fn the_template_pins_only_versions_the_workspace_builds_with() {
    let repo = repo();
    let template = pinned(&repo.join("templates/assignor/Cargo.lock"));
    let workspace = pinned(&repo.join("Cargo.lock"));
    assert!(
        template.iter().any(|(name, _)| name == "abi_stable"),
        "the template's Cargo.lock pins abi_stable"
    );
    let missing: Vec<String> = template
        .difference(&workspace)
        .map(|(name, version)| format!("{name} {version}"))
        .collect();
    assert!(
        missing.is_empty(),
        "templates/assignor/Cargo.lock pins versions Cargo.lock does not have: {missing:?}. \
         Refresh it from the workspace's: cp Cargo.lock templates/assignor/ && cargo \
         metadata --offline --format-version 1 --manifest-path templates/assignor/Cargo.toml \
         >/dev/null"
    );
    // The checkout's own crates: a version bump of drover-abi or the testkit must be
    // carried into the template's lock (`--locked` refuses to update it).
    let ours = packages(&repo.join("Cargo.lock"), false);
    let stale: Vec<String> = packages(&repo.join("templates/assignor/Cargo.lock"), false)
        .into_iter()
        .filter(|(name, _)| name.starts_with("drover-"))
        .filter(|p| !ours.contains(p))
        .map(|(name, version)| format!("{name} {version}"))
        .collect();
    assert!(
        stale.is_empty(),
        "templates/assignor/Cargo.lock pins Drover crates at versions the checkout does not \
         have: {stale:?}. Set them to the checkout's versions (abi/Cargo.toml, \
         plugins/testkit/Cargo.toml) in templates/assignor/Cargo.lock"
    );
}

/// Runs `cargo ARGS --offline --locked` in `dir` with the target dir the plugin
/// fixtures share ([`drover_tests::fixtures_target_dir`]: the third-party crates are
/// built once for every copy and the compat trees).
fn cargo(dir: &Path, args: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args(args)
        .args(["--offline", "--locked", "--target-dir"])
        .arg(drover_tests::fixtures_target_dir())
        .env("CARGO_PROFILE_DEV_DEBUG", drover_tests::FIXTURE_DEBUG)
        .current_dir(dir)
        .output()
        .expect("run cargo");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "cargo {args:?} in {dir:?} failed:\n{text}"
    );
    text
}

/// `scripts/new-plugin.sh [--vendor] DEST` into a fresh directory outside the checkout.
fn new_plugin(vendor: bool) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("my-assignor");
    assert!(
        !dest.starts_with(repo()),
        "the copy must be outside the checkout"
    );
    let mut cmd = Command::new("bash");
    cmd.arg(repo().join("scripts/new-plugin.sh"));
    if vendor {
        cmd.arg("--vendor");
    }
    let out = cmd.arg(&dest).output().expect("run scripts/new-plugin.sh");
    assert!(
        out.status.success(),
        "new-plugin.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (tmp, dest)
}

#[test]
fn a_copy_outside_the_checkout_builds_offline_and_passes_its_tests() {
    let (_tmp, dest) = new_plugin(false);
    let manifest = std::fs::read_to_string(dest.join("Cargo.toml")).unwrap();
    let abi = format!("path = \"{}\"", repo().join("abi").display());
    assert!(manifest.contains(&abi), "{manifest}");
    let test = cargo(&dest, &["test"]);
    // The suite's lines show on success (drover-plugin-testkit's assert_passed).
    assert!(test.contains("    PASS contract"), "{test}");
    assert!(test.contains("    SKIP sticky: not claimed"), "{test}");
    cargo(&dest, &["build"]);

    // What it built is a plugin the broker loads.
    let so = drover_tests::fixtures_target_dir().join("debug/libmy_assignor.so");
    let dir = PluginDir::new();
    let path = dir.add_file(&so);
    let plugin = dir
        .loader()
        .load(&path, Some(PluginKind::Assignor))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plugin.summary.name, "my-assignor");
    let handle = plugin.new_assignor("").unwrap_or_else(|e| panic!("{e}"));
    let member = |id: &str| AssignorMember {
        member_id: id.into(),
        topics: RVec::from(vec!["t".into()]),
        owned: RVec::new(),
        rack: None.into(),
        weight: 1,
    };
    let input = AssignInput {
        group: "g".into(),
        members: RVec::from(vec![member("a"), member("b")]),
        topics: RVec::from(vec![TopicInfo::new("t", 4)]),
    };
    let out = handle.assign(&input).unwrap_or_else(|e| panic!("{e}"));
    let counts: Vec<usize> = out
        .members
        .iter()
        .map(|m| m.partitions.iter().map(|t| t.partitions.len()).sum())
        .collect();
    assert_eq!(counts, [2, 2]);
    // The template serves share groups (assignor ABI 3.3): the share suite passes
    // through the loaded `.so`.
    assert!(test.contains("    PASS share_contract"), "{test}");
    let report = drover_plugin_testkit::assignor::share::run(
        &handle.instance(),
        &drover_plugin_testkit::assignor::Options::default(),
    );
    assert!(report.passed(), "{report}");
}

#[test]
fn a_vendored_copy_builds_offline_without_the_checkout_and_passes_its_tests() {
    let (_tmp, dest) = new_plugin(true);
    let manifest = std::fs::read_to_string(dest.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("drover-abi = { path = \"vendor/drover/abi\" }"),
        "{manifest}"
    );
    assert!(
        !manifest.contains(&repo().display().to_string()),
        "nothing points into the checkout: {manifest}"
    );
    let test = cargo(&dest, &["test"]);
    assert!(test.contains("    PASS balanced"), "{test}");
}
