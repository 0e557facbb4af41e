//! `drover plugins test`, run as a plugin author would run it: the built `drover`
//! binary against the built `.so` files, copied into a private plugin directory.

use std::process::Command;

use drover_tests::{set_mode, PluginDir};

/// Runs `drover plugins test` on the built `lib<lib>.so` with `args`; returns the exit
/// code, stdout and stderr.
fn plugins_test(dir: &PluginDir, lib: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let file = dir.add_built(lib);
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["plugins", "test"])
        .arg(&file)
        .args(args)
        .env("TMPDIR", std::env::temp_dir())
        .output()
        .expect("run drover");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The property lines of the output (after the header line).
fn verdicts(stdout: &str) -> Vec<&str> {
    stdout.lines().skip(1).collect()
}

#[test]
fn every_in_tree_assignor_passes_with_what_it_claims() {
    let dir = PluginDir::new();
    for (lib, claims) in [
        ("drover_assignor_range", ""),
        ("drover_assignor_round_robin", "balanced"),
        ("drover_assignor_sticky", "balanced,sticky"),
        ("drover_assignor_load_aware", "balanced,sticky"),
        ("drover_example_weighted_assignor", "balanced"),
    ] {
        let (code, stdout, stderr) = plugins_test(&dir, lib, &["--claims", claims]);
        assert_eq!(code, Some(0), "{lib}: {stdout}{stderr}");
        let lines = verdicts(&stdout);
        assert!(lines.contains(&"PASS contract"), "{lib}: {stdout}");
        assert!(
            lines.contains(&"PASS refuses_duplicate_topic"),
            "{lib}: {stdout}"
        );
        for claim in ["balanced", "sticky"] {
            let claimed = claims.split(',').any(|c| c == claim);
            let want = if claimed { "PASS" } else { "SKIP" };
            assert!(
                lines
                    .iter()
                    .any(|l| l.starts_with(&format!("{want} {claim}"))),
                "{lib}: {stdout}"
            );
        }
        assert!(
            lines.iter().all(|l| !l.starts_with("FAIL")),
            "{lib}: {stdout}"
        );
    }
}

#[test]
fn range_claiming_balance_fails_balanced() {
    // Range balances per topic only: claiming more than it guarantees is caught.
    let dir = PluginDir::new();
    let (code, stdout, _) = plugins_test(&dir, "drover_assignor_range", &["--claims", "balanced"]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("FAIL balanced: identical subscriptions")),
        "{stdout}"
    );
}

#[test]
fn the_embedded_store_passes_with_crash_safety() {
    let dir = PluginDir::new();
    let (code, stdout, stderr) = plugins_test(
        &dir,
        "drover_offsets_embedded",
        &["--config", r#"path = "{tmp}/offsets.redb""#],
    );
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    for property in [
        "round_trip",
        "all_or_nothing",
        "concurrent_commits",
        "close",
        "reopen",
        "crash_safety",
    ] {
        assert!(
            verdicts(&stdout).contains(&format!("PASS {property}").as_str()),
            "{stdout}"
        );
    }
}

/// The stores on a network backend, against the test's real ZooKeeper and PostgreSQL
/// servers (started once per test binary by drover-tests).
#[test]
fn the_zookeeper_and_postgres_stores_pass_with_crash_safety() {
    for (lib, name) in [
        ("drover_offsets_zookeeper", "zookeeper"),
        ("drover_offsets_postgres", "postgres"),
    ] {
        let dir = PluginDir::new();
        let config = drover_tests::store_config(name, &dir);
        let (code, stdout, stderr) = plugins_test(&dir, lib, &["--config", &config]);
        assert_eq!(code, Some(0), "{name}: {stdout}{stderr}");
        for property in ["round_trip", "reopen", "crash_safety"] {
            assert!(
                verdicts(&stdout).contains(&format!("PASS {property}").as_str()),
                "{name}: {stdout}"
            );
        }
    }
}

#[test]
fn an_assignor_giving_a_partition_twice_fails_contract() {
    let dir = PluginDir::new();
    let (code, stdout, stderr) = plugins_test(&dir, "drover_fixture_double_assignor", &[]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    let failed: Vec<&str> = verdicts(&stdout)
        .into_iter()
        .filter(|l| l.starts_with("FAIL"))
        .collect();
    // The contract, checked through `assign` and through `assign_with_context`
    // (assignor ABI 3.1), and nothing else.
    assert_eq!(failed.len(), 2, "{stdout}");
    assert!(
        failed[0].starts_with("FAIL contract: partition 0 of"),
        "{stdout}"
    );
    assert!(
        failed[1].starts_with("FAIL context_contract: partition 0 of"),
        "{stdout}"
    );
    assert!(failed.iter().all(|l| l.contains("given to")), "{stdout}");
}

#[test]
fn a_store_losing_a_batch_on_reopen_fails_reopen() {
    let dir = PluginDir::new();
    let (code, stdout, stderr) = plugins_test(
        &dir,
        "drover_fixture_lossy_store",
        &["--config", r#"path = "{tmp}/offsets""#],
    );
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    let lines = verdicts(&stdout);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("FAIL reopen: after a close and a fresh open")),
        "{stdout}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("FAIL crash_safety: after kill -9")),
        "{stdout}"
    );
    assert!(lines.contains(&"PASS round_trip"), "{stdout}");
}

#[test]
fn a_refused_file_exits_1_with_the_loaders_reason() {
    let dir = PluginDir::new();
    let file = dir.add_built("drover_assignor_range");
    set_mode(&file, 0o666);
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["plugins", "test"])
        .arg(&file)
        .env("TMPDIR", std::env::temp_dir())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("writable by group or others"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn a_coordinator_has_no_suite_yet() {
    let dir = PluginDir::new();
    let (code, stdout, _) = plugins_test(&dir, "drover_coordinator", &[]);
    assert_eq!(code, Some(3), "{stdout}");
    assert!(stdout.contains("no conformance suite yet"), "{stdout}");
}

/// The example authorizer (no ACLs) with a policy file, told its super user.
#[test]
fn the_example_authorizer_passes_with_its_super_user() {
    let dir = PluginDir::new();
    let policy = dir.scratch("policy");
    std::fs::write(&policy, "super User:admin\nlabel topic orders-* sales\n").unwrap();
    let config = format!("policy = {:?}", policy.display().to_string());
    let args = ["--config", &config, "--super-user", "User:admin"];
    let (code, stdout, stderr) = plugins_test(&dir, "drover_example_policy_authorizer", &args);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout
            .lines()
            .next()
            .unwrap()
            .contains("authorizer `policy-file`"),
        "{stdout}"
    );
    let lines = verdicts(&stdout);
    for property in [
        "one_decision_per_action",
        "in_order",
        "denies_unknown_codes",
        "super_user",
    ] {
        assert!(
            lines.contains(&format!("PASS {property}").as_str()),
            "{stdout}"
        );
    }
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("SKIP deny_beats_allow: the authorizer keeps no ACLs")),
        "{stdout}"
    );

    // Without --super-user, that property is skipped and says how to run it.
    let (code, stdout, _) = plugins_test(&dir, "drover_example_policy_authorizer", &args[..2]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        verdicts(&stdout)
            .iter()
            .any(|l| l.starts_with("SKIP super_user: no super user given")),
        "{stdout}"
    );
}

#[test]
fn an_acl_authorizer_passes_every_property_and_a_wrong_one_fails() {
    let dir = PluginDir::new();
    let lib = "drover_fixture_faulty_authorizer";
    let config = "super_user = \"User:admin\"";
    let args = [
        "--config",
        config,
        "--super-user",
        "User:admin",
        "--cases",
        "16",
    ];
    let (code, stdout, stderr) = plugins_test(&dir, lib, &args);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let lines = verdicts(&stdout);
    assert_eq!(lines.len(), 7, "{stdout}");
    assert!(lines.iter().all(|l| l.starts_with("PASS ")), "{stdout}");

    let (code, stdout, _) = plugins_test(&dir, lib, &["--config", "fault = \"too_few\""]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        verdicts(&stdout).contains(
            &"FAIL one_decision_per_action: authorize answered 0 decisions for 1 actions"
        ),
        "{stdout}"
    );
}

#[test]
fn an_authorizer_refusing_its_config_exits_1() {
    let dir = PluginDir::new();
    let lib = "drover_example_policy_authorizer";
    let (code, stdout, stderr) =
        plugins_test(&dir, lib, &["--config", "policy = \"/nonexistent\""]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("/nonexistent"), "{stderr}");
}
