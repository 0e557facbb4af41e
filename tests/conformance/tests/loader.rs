//! Loader tests through real plugin files: every refusal is one clear line, broken files
//! do not stop the rest of the directory, plugins of one kind load as themselves, and a
//! panicking plugin is isolated.

use std::collections::HashSet;

use drover_abi::{
    std_types::{RNone, RString, RVec},
    AssignInput, AssignorMember, ErrorKind, PluginKind, TopicInfo,
};
use drover_host::plugins::{CallError, LoadError, Loader, LoaderOptions, PluginRegistry};
use drover_tests::{set_mode, PluginDir};

fn input(group: &str, members: &[&str], partitions: u32) -> AssignInput {
    AssignInput {
        group: RString::from(group),
        members: members
            .iter()
            .map(|id| AssignorMember {
                member_id: RString::from(*id),
                topics: RVec::from(vec![RString::from("t")]),
                owned: RVec::new(),
                rack: RNone,
                weight: 1,
            })
            .collect(),
        topics: RVec::from(vec![TopicInfo::new("t", partitions)]),
    }
}

#[test]
fn garbage_file_is_refused_and_the_rest_loads() {
    let dir = PluginDir::new();
    dir.add_bytes("libx.so", b"this is not a shared object");
    dir.add_built("drover_assignor_range");
    let registry = PluginRegistry::scan(&dir.loader(), &dir.path()).unwrap();
    let refused: Vec<String> = registry.refused().map(|e| e.to_string()).collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].contains("libx.so"), "{}", refused[0]);
    assert!(
        refused[0].contains("expected an ELF shared object"),
        "{}",
        refused[0]
    );
    assert!(registry.find(PluginKind::Assignor, "range").is_some());
}

#[test]
fn world_writable_plugin_and_directory_are_refused() {
    let dir = PluginDir::new();
    let path = dir.add_built("drover_assignor_range");
    set_mode(&path, 0o666);
    let err = dir.loader().load(&path, None).err().expect("refused");
    assert!(matches!(err, LoadError::InsecureFile { .. }), "{err}");
    assert!(err.to_string().contains("chmod go-w"), "{err}");

    set_mode(&path, 0o644);
    set_mode(&dir.path(), 0o777);
    let err = dir.loader().load(&path, None).err().expect("refused");
    assert!(matches!(err, LoadError::InsecureDir { .. }), "{err}");
    set_mode(&dir.path(), 0o755);
    dir.loader().load(&path, None).expect("loads once fixed");
}

#[test]
fn plugin_built_against_another_abi_major_is_refused() {
    let dir = PluginDir::new();
    let path = dir.add_built("drover_fixture_abi_next_major");
    let err = dir.loader().load(&path, None).err().expect("refused");
    let text = err.to_string();
    assert!(
        matches!(err, LoadError::AbiMajor { expected: 1, .. }),
        "{text}"
    );
    assert!(text.contains("expected drover-abi 1.x"), "{text}");
    assert!(text.contains("found drover-abi 2.0.0"), "{text}");
    assert!(text.contains("hint: rebuild"), "{text}");
}

#[test]
fn plugin_with_another_layout_is_refused() {
    let dir = PluginDir::new();
    let path = dir.add_built("drover_fixture_layout_mismatch");
    let err = dir.loader().load(&path, None).err().expect("refused");
    let text = err.to_string();
    assert!(matches!(err, LoadError::Layout { .. }), "{text}");
    assert!(text.contains("ABI layout mismatch"), "{text}");
    assert!(!text.contains('\n'), "one line: {text}");
    assert!(text.len() < 1000, "short: {text}");
}

#[test]
fn wrong_kind_is_refused_when_a_kind_is_expected() {
    let dir = PluginDir::new();
    let path = dir.add_built("drover_assignor_range");
    let err = dir
        .loader()
        .load(&path, Some(PluginKind::OffsetStore))
        .err()
        .expect("refused");
    assert!(
        err.to_string()
            .contains("expected offset-store, found assignor"),
        "{err}"
    );
}

#[test]
fn allowlist_admits_only_listed_digests() {
    let dir = PluginDir::new();
    let range = dir.add_built("drover_assignor_range");
    let rr = dir.add_built("drover_assignor_round_robin");
    let range_digest = dir.loader().load(&range, None).unwrap().sha256;
    let loader = Loader::new(LoaderOptions {
        cache_dir: dir.scratch("cache2"),
        allowlist: HashSet::from([range_digest]),
    });
    loader.load(&range, None).expect("listed file loads");
    let err = loader.load(&rr, None).err().expect("unlisted file refused");
    assert!(matches!(err, LoadError::NotAllowlisted { .. }), "{err}");
}

#[test]
fn two_assignors_load_as_themselves() {
    let dir = PluginDir::new();
    dir.add_built("drover_assignor_range");
    dir.add_built("drover_assignor_round_robin");
    let registry = PluginRegistry::scan(&dir.loader(), &dir.path()).unwrap();
    assert_eq!(registry.refused().count(), 0);
    let range = registry.find(PluginKind::Assignor, "range").unwrap();
    let rr = registry.find(PluginKind::Assignor, "round-robin").unwrap();
    assert_ne!(range.sha256, rr.sha256);
    let range = range.new_assignor("").unwrap();
    let rr = rr.new_assignor("").unwrap();
    assert_eq!(range.summary().name, "range");
    assert_eq!(rr.summary().name, "round-robin");

    // Two members, four partitions: range gives contiguous blocks, round-robin
    // alternates. Equal results would mean one library answered for both.
    let input = input("g", &["a", "b"], 4);
    let of = |a: &drover_abi::Assignment, m: &str| -> Vec<i32> {
        let member = a
            .members
            .iter()
            .find(|x| x.member_id.as_str() == m)
            .unwrap();
        member
            .partitions
            .iter()
            .flat_map(|tp| tp.partitions.iter().copied())
            .collect()
    };
    let by_range = range.assign(&input).unwrap();
    let by_rr = rr.assign(&input).unwrap();
    assert_eq!(of(&by_range, "a"), vec![0, 1]);
    assert_eq!(of(&by_rr, "a"), vec![0, 2]);
}

#[test]
fn duplicate_plugin_name_is_reported() {
    let dir = PluginDir::new();
    let first = dir.add_built("drover_assignor_range");
    std::fs::copy(&first, dir.path().join("libzz_copy_of_range.so")).unwrap();
    set_mode(&dir.path().join("libzz_copy_of_range.so"), 0o644);
    let registry = PluginRegistry::scan(&dir.loader(), &dir.path()).unwrap();
    let refused: Vec<String> = registry.refused().map(|e| e.to_string()).collect();
    assert_eq!(refused.len(), 1);
    assert!(
        refused[0].contains("duplicate assignor plugin `range`"),
        "{}",
        refused[0]
    );
}

#[test]
fn panicking_plugin_returns_an_error_and_is_taken_out_of_service() {
    let dir = PluginDir::new();
    dir.add_built("drover_fixture_chaos_assignor");
    dir.add_built("drover_assignor_range");
    let registry = PluginRegistry::scan(&dir.loader(), &dir.path()).unwrap();
    let chaos = registry
        .find(PluginKind::Assignor, "chaos")
        .unwrap()
        .new_assignor("")
        .unwrap();
    let range = registry
        .find(PluginKind::Assignor, "range")
        .unwrap()
        .new_assignor("")
        .unwrap();

    chaos
        .assign(&input("calm", &["a"], 2))
        .expect("works before the panic");
    let err = chaos.assign(&input("panic", &["a"], 2)).unwrap_err();
    match &err {
        CallError::Plugin { plugin, error } => {
            assert_eq!(plugin, "chaos");
            assert_eq!(error.kind, ErrorKind::Panicked);
            assert!(error.message.contains("asked to panic"), "{err}");
        }
        other => panic!("unexpected {other}"),
    }
    assert!(chaos.is_out_of_service());
    let err = chaos.assign(&input("calm", &["a"], 2)).unwrap_err();
    assert!(matches!(err, CallError::OutOfService { .. }), "{err}");

    // The host and the other plugins keep working.
    range
        .assign(&input("g", &["a", "b"], 4))
        .expect("range still serves");
}
