//! The `drover` binary's plugin commands, run as a user would run them.

use std::process::Command;

use drover_tests::{set_mode, PluginDir};

fn drover(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(args)
        .env("TMPDIR", std::env::temp_dir())
        .output()
        .expect("run drover");
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
