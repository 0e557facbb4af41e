//! The `drover` binary's plugin commands, run as a user would run them.

use std::{path::Path, process::Command};

use drover_tests::{set_mode, PluginDir};

fn drover(args: &[&str]) -> (bool, String, String) {
    drover_in(args, None, &[])
}

/// Runs `drover args` in `cwd` (default: inherited) with extra environment `env`.
fn drover_in(args: &[&str], cwd: Option<&Path>, env: &[(&str, &str)]) -> (bool, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_drover"));
    command.args(args).env("TMPDIR", std::env::temp_dir());
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().expect("run drover");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn plugins_list_prints_a_row_per_file_and_exits_0_with_refusals() {
    let dir = PluginDir::new();
    dir.add_built("drover_assignor_range");
    dir.add_built("drover_assignor_sticky");
    dir.add_bytes("libx.so", b"not a library");
    let writable = dir.add_built("drover_assignor_round_robin");
    set_mode(&writable, 0o666);
    dir.add_bytes("README.txt", b"ignored: not a .so");

    let path = dir.path();
    let (ok, stdout, stderr) = drover(&["plugins", "list", "--plugin-dir", path.to_str().unwrap()]);
    assert!(ok, "exit status: {stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{stdout}");
    assert!(lines[0].starts_with("FILE"), "{stdout}");
    let row = |file: &str| *lines.iter().find(|l| l.starts_with(file)).unwrap();
    let range = row("libdrover_assignor_range.so");
    for cell in ["assignor", "range", "0.1.0", "1.0", "ok"] {
        assert!(range.contains(cell), "{range}");
    }
    assert!(
        row("libx.so").contains("refused: not a plugin library"),
        "{stdout}"
    );
    assert!(row("libdrover_assignor_round_robin.so").contains("writable by group or others"));
    assert!(!stdout.contains("refused: refused:"), "{stdout}");
    assert!(!stdout.contains("README"), "{stdout}");

    let (ok, json, _) = drover(&[
        "plugins",
        "list",
        "--plugin-dir",
        path.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(ok);
    assert_eq!(json.lines().count(), 4);
    assert!(json.contains(r#""name":"sticky""#), "{json}");
}

#[test]
fn plugins_check_stops_on_a_required_plugin_that_does_not_load() {
    let dir = PluginDir::new();
    dir.add_built("drover_assignor_range");
    dir.add_bytes("libdrover_assignor_sticky.so", b"truncated build");
    let config = dir.scratch("drover.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {:?}\n[plugins]\ndir = {:?}\nrequired = [\"range\", \"sticky\"]\n",
            dir.scratch("data").display().to_string(),
            dir.path().display().to_string()
        ),
    )
    .unwrap();
    let (ok, _, stderr) = drover(&["plugins", "check", "--config", config.to_str().unwrap()]);
    assert!(!ok, "must fail");
    assert!(
        stderr.contains("required plugin `sticky` not found"),
        "{stderr}"
    );
    assert!(stderr.contains("1 file(s) refused"), "{stderr}");
    // The refused file itself was reported, with its reason.
    assert!(
        stderr.contains("libdrover_assignor_sticky.so: not a plugin library"),
        "{stderr}"
    );

    std::fs::write(
        &config,
        format!(
            "data_dir = {:?}\n[plugins]\ndir = {:?}\nrequired = [\"range\"]\n",
            dir.scratch("data").display().to_string(),
            dir.path().display().to_string()
        ),
    )
    .unwrap();
    let (ok, stdout, stderr) = drover(&["plugins", "check", "--config", config.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("assignor range 0.1.0 (started)"),
        "{stdout}"
    );
}

#[test]
fn invalid_config_is_refused_with_the_key() {
    let dir = PluginDir::new();
    let config = dir.scratch("drover.toml");
    std::fs::write(&config, "[plugins]\ndirectory = 'x'\n").unwrap();
    let (ok, _, stderr) = drover(&["plugins", "check", "--config", config.to_str().unwrap()]);
    assert!(!ok);
    assert!(stderr.contains("directory"), "{stderr}");
}

fn write_config(dir: &PluginDir, extra_plugins: &str, tail: &str) -> std::path::PathBuf {
    let config = dir.scratch("drover.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {:?}\n[plugins]\ndir = {:?}\n{extra_plugins}\n{tail}",
            dir.scratch("data").display().to_string(),
            dir.path().display().to_string()
        ),
    )
    .unwrap();
    config
}

#[test]
fn a_refused_required_plugin_is_explained_even_at_rust_log_error() {
    let dir = PluginDir::new();
    dir.add_built("drover_assignor_range");
    dir.add_bytes("libdrover_assignor_sticky.so", b"truncated build");
    let config = write_config(&dir, "required = [\"range\", \"sticky\"]", "");
    let (ok, _, stderr) = drover_in(
        &["plugins", "check", "--config", config.to_str().unwrap()],
        None,
        &[("RUST_LOG", "error")],
    );
    assert!(!ok);
    assert!(!stderr.contains("WARN"), "{stderr}");
    assert!(
        stderr.contains("1 file(s) refused: libdrover_assignor_sticky.so (not a plugin library"),
        "{stderr}"
    );
    assert!(stderr.contains("hint: fix the refused file(s)"), "{stderr}");
}

#[test]
fn check_counts_a_plugin_that_failed_to_start_as_not_ready() {
    let dir = PluginDir::new();
    dir.add_built("drover_assignor_range");
    dir.add_built("drover_fixture_fragile_assignor");
    let config = write_config(
        &dir,
        "",
        "[plugins.config.fragile]\nfail_to_start = true\n[plugins.config.nosuch]\nx = 1\n",
    );
    let (ok, stdout, stderr) = drover(&["plugins", "check", "--config", config.to_str().unwrap()]);
    assert!(ok, "not required, so not fatal: {stderr}");
    assert!(
        stdout.contains("assignor range 0.1.0 (started)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("assignor fragile 0.1.0 (failed to start: InvalidConfig"),
        "{stdout}"
    );
    assert!(
        stdout.contains("1 plugin(s) ready, 1 failed to start, 0 file(s) refused"),
        "{stdout}"
    );
    // A config table for a plugin that is not there is reported, not silently ignored.
    assert!(
        stderr.contains("[plugins.config.nosuch] names no loaded plugin"),
        "{stderr}"
    );
}

#[test]
fn check_without_a_config_creates_no_data_directory() {
    let dir = PluginDir::new();
    dir.add_built("drover_assignor_range");
    let cwd = dir.scratch("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let (ok, stdout, stderr) = drover_in(
        &[
            "plugins",
            "check",
            "--plugin-dir",
            dir.path().to_str().unwrap(),
        ],
        Some(&cwd),
        &[],
    );
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("assignor range 0.1.0 (started)"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_dir(&cwd).unwrap().count(),
        0,
        "created files in the cwd"
    );
}

#[test]
fn a_missing_plugin_directory_is_named_with_a_hint() {
    let dir = PluginDir::new();
    let missing = dir.scratch("no-such-dir");
    let (ok, _, stderr) = drover(&["plugins", "list", "--plugin-dir", missing.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        stderr.contains(&format!(
            "cannot read the plugin directory {}",
            missing.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("hint: create it"), "{stderr}");
}

#[test]
fn an_unsafe_plugin_cache_fails_list_and_check_with_one_error() {
    let dir = PluginDir::new();
    dir.add_built("drover_assignor_range");
    dir.add_built("drover_assignor_sticky");
    let open = dir.scratch("open");
    std::fs::create_dir(&open).unwrap();
    set_mode(&open, 0o777);
    let config = write_config(
        &dir,
        &format!("cache_dir = {:?}", open.join("cache").display().to_string()),
        "",
    );
    for command in ["list", "check"] {
        let (ok, stdout, stderr) =
            drover(&["plugins", command, "--config", config.to_str().unwrap()]);
        assert!(!ok, "{command}: {stdout}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(errors.len(), 1, "{stderr}");
        assert!(errors[0].contains("plugin cache"), "{stderr}");
        assert!(
            errors[0].contains("writable by group or others"),
            "{stderr}"
        );
        assert!(!stderr.contains("WARN"), "no per-file refusals: {stderr}");
    }
}

#[test]
fn control_characters_in_file_names_cannot_fake_table_rows() {
    let dir = PluginDir::new();
    dir.add_built("drover_assignor_range");
    dir.add_bytes(
        "x\nlibfake.so  assignor  sticky  0.1.0    1.0  ok\nz.so",
        b"junk",
    );
    let (ok, stdout, stderr) = drover(&[
        "plugins",
        "list",
        "--plugin-dir",
        dir.path().to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.lines().count(), 3, "{stdout}");
    assert!(stdout.contains(r"x\nlibfake.so"), "{stdout}");
}

#[test]
fn check_help_says_what_is_started() {
    let (ok, stdout, _) = drover(&["plugins", "check", "--help"]);
    assert!(ok);
    assert!(stdout.contains("start every assignor"), "{stdout}");
    assert!(!stdout.contains("start each named plugin"), "{stdout}");
}

#[test]
fn check_refuses_what_serve_refuses_when_a_coordinator_runs() {
    let dir = PluginDir::new();
    for lib in [
        "drover_coordinator",
        "drover_assignor_range",
        "drover_offsets_embedded",
    ] {
        dir.add_built(lib);
    }
    let check = |tail: &str| {
        let config = write_config(&dir, "", tail);
        drover(&["plugins", "check", "--config", config.to_str().unwrap()])
    };
    let (ok, _, stderr) = check("");
    assert!(ok, "{stderr}");
    let (ok, _, stderr) = check("[plugins.config.drover-coordinator]\nbogus_key = 1\n");
    assert!(!ok && stderr.contains("bogus_key"), "{stderr}");
    let (ok, _, stderr) = check("[coordinator]\ndefault_assignor = \"nosuch\"\n");
    assert!(
        !ok && stderr.contains("assignor `nosuch` is not loaded"),
        "{stderr}"
    );
    let blocker = dir.scratch("not-a-dir");
    std::fs::write(&blocker, "x").unwrap();
    let (ok, _, stderr) = check(&format!(
        "[plugins.config.embedded]\npath = {:?}\n",
        blocker.join("offsets.redb").display().to_string()
    ));
    assert!(
        !ok && stderr.contains("offset store `embedded` is not available"),
        "{stderr}"
    );
}
