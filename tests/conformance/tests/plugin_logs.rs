//! A plugin's `tracing` events reach the host's log inside a `plugin{name,version}`
//! span. Own test binary: it installs the global subscriber before any plugin loads.

use std::{
    io::Write,
    sync::{Arc, Mutex},
};

use drover_abi::{
    std_types::{RNone, RString, RVec},
    AssignInput, AssignorMember, TopicInfo,
};
use drover_tests::load_assignor;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn plugin_log_lines_appear_in_the_host_log_with_the_plugin_name() {
    let captured = Captured::default();
    let writer = captured.clone();
    tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .init();

    let (_plugin, chaos) = load_assignor("drover_fixture_chaos_assignor");
    let input = AssignInput {
        group: RString::from("orders"),
        members: RVec::from(vec![AssignorMember {
            member_id: RString::from("m1"),
            topics: RVec::from(vec![RString::from("t")]),
            owned: RVec::new(),
            rack: RNone,
            weight: 1,
        }]),
        topics: RVec::from(vec![TopicInfo::new("t", 1)]),
    };
    chaos.assign(&input).unwrap();

    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let created = log
        .lines()
        .find(|l| l.contains("chaos assignor created"))
        .unwrap_or_else(|| panic!("no creation line in:\n{log}"));
    assert!(created.contains("INFO"), "{created}");
    assert!(
        created.contains("plugin{name=chaos version=0.1.0}"),
        "{created}"
    );
    let called = log
        .lines()
        .find(|l| l.contains("chaos assign called"))
        .unwrap_or_else(|| panic!("no call line in:\n{log}"));
    assert!(called.contains("WARN"), "{called}");
    assert!(called.contains("group=orders"), "{called}");
    assert!(
        called.contains("plugin{name=chaos version=0.1.0}"),
        "{called}"
    );
}
