//! The offset-store suite against a deliberately broken store, in-process: it fails
//! exactly the property the bug breaks, and the report names it.

use drover_abi::sdk::in_process;
use drover_fixture_lossy_store::Lossy;
use drover_plugin_testkit::{offset_store, Verdict};

fn failed(report: &drover_plugin_testkit::Report) -> Vec<&'static str> {
    report.failures().map(|o| o.property).collect()
}

#[test]
fn a_store_losing_its_last_batch_fails_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "path = {:?}\n",
        dir.path().join("offsets").display().to_string()
    );
    let open = || in_process::offset_store::<Lossy>(&config);
    let report = offset_store::run(&open, &offset_store::Options::default().scan_records(5_000));
    assert_eq!(failed(&report), ["reopen"], "{report}");
    let Some(Verdict::Fail(why)) = report.verdict("reopen") else {
        panic!("{report}")
    };
    assert!(why.contains("after a close and a fresh open"), "{why}");
}
