//! Loader tests through real plugin files: every refusal is one clear line, broken files
//! do not stop the rest of the directory, plugins of one kind load as themselves, and a
//! panicking plugin is isolated.

use std::{
    collections::HashSet,
    os::unix::fs::MetadataExt,
    path::Path,
    time::{Duration, SystemTime},
};

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
        matches!(
            err,
            LoadError::AbiMajor {
                kind: PluginKind::Assignor,
                expected_major: 3,
                ..
            }
        ),
        "{text}"
    );
    assert!(text.contains("assignor ABI major mismatch"), "{text}");
    assert!(text.contains("expected assignor ABI 3.x"), "{text}");
    assert!(text.contains("found assignor ABI 4.0"), "{text}");
    assert!(text.contains("hint: rebuild"), "{text}");
}

#[test]
fn plugin_built_against_a_later_minor_is_refused() {
    let dir = PluginDir::new();
    let path = dir.add_built("drover_fixture_abi_next_minor");
    let err = dir.loader().load(&path, None).err().expect("refused");
    let text = err.to_string();
    assert!(
        matches!(
            err,
            LoadError::AbiNewer {
                kind: PluginKind::Assignor,
                ..
            }
        ),
        "{text}"
    );
    let host = PluginKind::Assignor.abi_version();
    assert!(
        text.contains(&format!("expected assignor ABI {host} or older")),
        "{text}"
    );
    assert!(text.contains("found assignor ABI 3.99"), "{text}");
    assert!(text.contains("hint: upgrade the broker"), "{text}");
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
        refused[0]
            .contains("duplicate plugin name `range`: already used by the assignor plugin in"),
        "{}",
        refused[0]
    );
}

#[test]
fn plugin_names_are_unique_across_kinds() {
    let dir = PluginDir::new();
    // An assignor named `embedded` sorts before the offset store of that name.
    let clash = dir.add_built("drover_fixture_name_clash");
    let store = dir.add_built("drover_offsets_embedded");
    let registry = PluginRegistry::scan(&dir.loader(), &dir.path()).unwrap();
    let loaded: Vec<_> = registry.loaded().map(|p| p.path.clone()).collect();
    assert_eq!(loaded, vec![clash.clone()]);
    let refused: Vec<&LoadError> = registry.refused().collect();
    assert_eq!(refused.len(), 1);
    assert!(
        matches!(
            refused[0],
            LoadError::Duplicate {
                kind: PluginKind::OffsetStore,
                first_kind: PluginKind::Assignor,
                ..
            }
        ),
        "{}",
        refused[0]
    );
    let text = refused[0].to_string();
    assert!(
        text.starts_with(&format!("{}: ", store.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "duplicate plugin name `embedded`: already used by the assignor plugin in {}",
            clash.display()
        )),
        "{text}"
    );
    assert!(registry.find(PluginKind::OffsetStore, "embedded").is_none());
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

#[test]
fn a_panic_in_a_plugins_drop_is_contained() {
    let dir = PluginDir::new();
    dir.add_built("drover_fixture_fragile_assignor");
    dir.add_built("drover_assignor_range");
    let registry = PluginRegistry::scan(&dir.loader(), &dir.path()).unwrap();
    let fragile = registry.find(PluginKind::Assignor, "fragile").unwrap();
    let handle = fragile
        .new_assignor("panic_on_drop = true\n")
        .expect("starts");
    handle.assign(&input("g", &["a"], 2)).expect("assigns");
    // Dropping the last reference runs the plugin's Drop, which panics. Without the
    // SDK's guard this aborts the test binary ("panic in a function that cannot unwind").
    drop(handle);

    let range = registry
        .find(PluginKind::Assignor, "range")
        .unwrap()
        .new_assignor("")
        .unwrap();
    range
        .assign(&input("g", &["a", "b"], 4))
        .expect("the host keeps running");
}

#[test]
fn a_symlink_to_a_plugin_in_the_directory_is_refused_as_the_same_file() {
    let dir = PluginDir::new();
    let real = dir.add_built("drover_assignor_range");
    // Sorts before the real file, yet the real file keeps its name.
    let link = dir.add_symlink("liba_alias.so", &real);
    let registry = PluginRegistry::scan(&dir.loader(), &dir.path()).unwrap();
    let range = registry.find(PluginKind::Assignor, "range").unwrap();
    assert_eq!(range.path, real);
    let refused: Vec<&LoadError> = registry.refused().collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    let text = refused[0].to_string();
    assert!(matches!(refused[0], LoadError::SameFile { .. }), "{text}");
    assert!(text.starts_with(&format!("{}: ", link.display())), "{text}");
    assert!(
        text.contains(&format!("same file as {}", real.display())),
        "{text}"
    );
    assert!(!text.contains("duplicate"), "{text}");
}

#[test]
fn a_symlinked_plugin_is_judged_by_the_directories_above_its_real_file() {
    let dir = PluginDir::new();
    let elsewhere = dir.root().join("shared/lib");
    std::fs::create_dir_all(&elsewhere).unwrap();
    set_mode(&dir.root().join("shared"), 0o755);
    set_mode(&elsewhere, 0o755);
    let real = elsewhere.join("librange.so");
    std::fs::copy(drover_tests::built_library("drover_assignor_range"), &real).unwrap();
    set_mode(&real, 0o644);
    let link = dir.add_symlink("librange.so", &real);
    dir.loader()
        .load(&link, None)
        .expect("every directory is safe");

    // Group-writable two levels above the real file: refused, naming that directory.
    set_mode(&dir.root().join("shared"), 0o775);
    let err = dir.loader().load(&link, None).err().expect("refused");
    let text = err.to_string();
    let shared = std::fs::canonicalize(dir.root().join("shared")).unwrap();
    assert!(matches!(err, LoadError::InsecureDir { .. }), "{text}");
    assert!(
        text.contains(&format!("directory {} is writable", shared.display())),
        "{text}"
    );
    assert!(text.contains("mode 775"), "{text}");
    assert!(text.contains("hint: chmod go-w"), "{text}");
}

#[test]
fn dangling_symlinks_and_directories_named_so_are_reported() {
    let dir = PluginDir::new();
    dir.add_symlink("libgone.so", &dir.path().join("nowhere.so"));
    std::fs::create_dir(dir.path().join("libdir.so")).unwrap();
    dir.add_built("drover_assignor_range");
    let registry = PluginRegistry::scan(&dir.loader(), &dir.path()).unwrap();
    let refused: Vec<String> = registry.refused().map(|e| e.to_string()).collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(
        refused[0].contains("libdir.so: refused: not a regular file"),
        "{}",
        refused[0]
    );
    assert!(
        refused[1].contains("libgone.so: refused: dangling symlink"),
        "{}",
        refused[1]
    );
    assert!(registry.find(PluginKind::Assignor, "range").is_some());
}

#[test]
fn an_unsafe_cache_directory_stops_the_scan_with_one_error() {
    let dir = PluginDir::new();
    dir.add_built("drover_assignor_range");
    dir.add_built("drover_assignor_sticky");

    // A group-writable directory above the cache.
    let shared = dir.root().join("shared");
    std::fs::create_dir(&shared).unwrap();
    set_mode(&shared, 0o775);
    let loader = dir.loader_with_cache(shared.join("plugin-cache"));
    let err = PluginRegistry::scan(&loader, &dir.path())
        .err()
        .expect("scan fails");
    let text = err.to_string();
    assert!(matches!(err, LoadError::CacheDir { .. }), "{text}");
    assert!(text.starts_with("plugin cache "), "{text}");
    assert!(text.contains("is writable by group or others"), "{text}");
    assert!(text.contains("hint: chmod go-w"), "{text}");
    assert!(
        !shared.join("plugin-cache").exists(),
        "nothing is created below an unsafe directory"
    );

    // The cache itself open to others.
    set_mode(&shared, 0o755);
    std::fs::create_dir(shared.join("plugin-cache")).unwrap();
    set_mode(&shared.join("plugin-cache"), 0o755);
    let err = PluginRegistry::scan(&loader, &dir.path())
        .err()
        .expect("scan fails");
    assert!(err.to_string().contains("expected 700"), "{err}");
    set_mode(&shared.join("plugin-cache"), 0o700);
    PluginRegistry::scan(&loader, &dir.path()).expect("loads once fixed");
}

#[test]
fn a_cache_parent_owned_by_someone_else_is_refused() {
    let dir = PluginDir::new();
    // The temp root is ours: its owner is the effective uid.
    if std::fs::metadata(dir.root()).unwrap().uid() != 0 {
        return; // planting a directory for another uid needs root
    }
    dir.add_built("drover_assignor_range");
    // Like a /tmp/drover-<uid> pre-created by another user.
    let planted = dir.root().join("drover-0");
    std::fs::create_dir(&planted).unwrap();
    set_mode(&planted, 0o755);
    std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).unwrap();
    let loader = dir.loader_with_cache(planted.join("plugin-cache"));
    let err = PluginRegistry::scan(&loader, &dir.path())
        .err()
        .expect("scan fails");
    let text = err.to_string();
    let planted = std::fs::canonicalize(planted).unwrap();
    assert!(
        text.contains(&format!("{} is owned by uid 65534", planted.display())),
        "{text}"
    );
    assert!(text.contains("expected uid 0"), "{text}");
}

#[test]
fn a_stale_temp_file_in_the_cache_does_not_block_loading() {
    let dir = PluginDir::new();
    let path = dir.add_built("drover_assignor_range");
    let digest = dir
        .loader_with_cache(dir.scratch("other-cache"))
        .load(&path, None)
        .unwrap()
        .sha256;
    let cache = dir.cache_dir();
    std::fs::create_dir(&cache).unwrap();
    set_mode(&cache, 0o700);
    // What a crash between create and rename leaves behind.
    let stale = cache.join(format!(".{digest}.{}.tmp", std::process::id()));
    std::fs::write(&stale, b"half a copy").unwrap();
    set_mode(&stale, 0o500);
    dir.loader().load(&path, None).expect("loads");
    assert!(!stale.exists());
    assert!(cache.join(format!("{digest}.so")).is_file());
}

fn age(path: &Path, by: Duration) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - by).unwrap();
}

#[test]
fn the_cache_is_pruned_of_old_unused_copies() {
    let dir = PluginDir::new();
    dir.add_built("drover_assignor_range");
    let loader = dir.loader();
    let registry = PluginRegistry::scan(&loader, &dir.path()).unwrap();
    let used = registry.loaded().next().unwrap().sha256.clone();
    let cache = dir.cache_dir();
    let used_copy = cache.join(format!("{used}.so"));
    let old = cache.join(format!("{}.so", "a".repeat(64)));
    let recent = cache.join(format!("{}.so", "b".repeat(64)));
    let not_ours = cache.join("notes.so");
    for f in [&old, &recent, &not_ours] {
        std::fs::write(f, b"x").unwrap();
    }
    let two_hours = Duration::from_secs(2 * 3600);
    for f in [&old, &not_ours, &used_copy] {
        age(f, two_hours);
    }
    PluginRegistry::scan(&loader, &dir.path()).unwrap();
    assert!(!old.exists(), "old unused copy pruned");
    assert!(recent.exists(), "recent copy kept");
    assert!(
        used_copy.exists(),
        "copy used by the scan kept, however old"
    );
    assert!(not_ours.exists(), "only <sha256>.so files are pruned");
}

#[test]
fn a_required_plugin_that_was_refused_is_reported_with_the_refusal() {
    let dir = PluginDir::new();
    dir.add_bytes("libdrover_assignor_sticky.so", b"truncated build");
    dir.add_built("drover_assignor_range");
    let registry = PluginRegistry::scan(&dir.loader(), &dir.path()).unwrap();
    let err = registry.require(None, "sticky").err().expect("missing");
    let text = err.to_string();
    assert!(
        text.contains("1 file(s) refused: libdrover_assignor_sticky.so (not a plugin library: expected an ELF shared object"),
        "{text}"
    );
    assert!(text.contains("hint: fix the refused file(s)"), "{text}");
    assert!(
        !text.contains("build the plugin as a cdylib"),
        "hints of refusals are cut: {text}"
    );
}

#[test]
fn a_dlopen_failure_names_the_plugin_file_not_the_cached_copy() {
    let dir = PluginDir::new();
    // A whole ELF shared object as far as the loader's own layout check goes (header
    // and one loadable segment inside the file) that the dynamic loader refuses.
    let mut bytes = vec![0u8; 4096];
    bytes[..4].copy_from_slice(b"\x7fELF");
    bytes[4] = 2; // 64-bit
    bytes[5] = 1; // little-endian
    bytes[6] = 1; // ELF version
    bytes[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
    bytes[18..20].copy_from_slice(&62u16.to_le_bytes()); // x86-64
    bytes[20..24].copy_from_slice(&1u32.to_le_bytes());
    bytes[32..40].copy_from_slice(&64u64.to_le_bytes()); // program headers at 64
    bytes[52..54].copy_from_slice(&64u16.to_le_bytes()); // header size
    bytes[54..56].copy_from_slice(&56u16.to_le_bytes());
    bytes[56..58].copy_from_slice(&1u16.to_le_bytes());
    bytes[64..68].copy_from_slice(&1u32.to_le_bytes()); // PT_LOAD
    bytes[64 + 32..64 + 40].copy_from_slice(&4096u64.to_le_bytes()); // p_filesz
    bytes[64 + 40..64 + 48].copy_from_slice(&4096u64.to_le_bytes()); // p_memsz
    bytes[64 + 48..64 + 56].copy_from_slice(&4096u64.to_le_bytes()); // p_align
    let path = dir.add_bytes("libbroken.so", &bytes);
    let err = dir.loader().load(&path, None).err().expect("refused");
    let text = err.to_string();
    assert!(matches!(err, LoadError::Dlopen { .. }), "{text}");
    assert!(
        text.starts_with(&format!("{}: cannot load library", path.display())),
        "{text}"
    );
    let cache = std::fs::canonicalize(dir.cache_dir()).unwrap();
    assert!(!text.contains(&cache.display().to_string()), "{text}");
    assert!(text.contains("expected a shared object"), "{text}");
    assert!(text.contains("hint:"), "{text}");
}

/// A plugin of a kind a later release adds (tests/fixtures/future-kind: root module
/// `drover_quota`, an `OpenManifest` of kind 4) is refused from its library header,
/// naming what it found and what it needs; the rest of the directory loads, an
/// authorizer (a kind added after the first three) beside the original kinds.
#[test]
fn a_plugin_of_a_kind_this_broker_does_not_know_is_refused_and_the_rest_loads() {
    let dir = PluginDir::new();
    let future = dir.add_built("drover_fixture_future_kind");
    dir.add_built("drover_assignor_range");
    dir.add_built("drover_offsets_embedded");
    dir.add_built("drover_fixture_panicking_authorizer");
    let registry = PluginRegistry::scan(&dir.loader(), &dir.path()).unwrap();
    let refused: Vec<&LoadError> = registry.refused().collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    let text = refused[0].to_string();
    assert!(
        matches!(refused[0], LoadError::UnknownKind { .. }),
        "{text}"
    );
    assert!(
        text.starts_with(&format!("{}: ", future.display())),
        "{text}"
    );
    assert!(text.contains("found `drover_quota`"), "{text}");
    assert!(
        text.contains("drover_authorizer"),
        "the kinds it knows: {text}"
    );
    assert!(text.contains("later Drover release"), "{text}");
    assert!(!text.contains('\n'), "one line: {text}");
    let kinds: Vec<PluginKind> = registry.loaded().map(|p| p.summary.kind).collect();
    assert_eq!(
        kinds,
        [
            PluginKind::Assignor,
            PluginKind::Authorizer,
            PluginKind::OffsetStore
        ]
    );
}

/// The kind is the root module's name; a manifest that names another kind is refused by
/// the manifest check (tests/fixtures/kind-mismatch: an authorizer root module whose
/// `OpenManifest` says assignor), and the module's constructor never runs.
#[test]
fn an_open_manifest_whose_kind_disagrees_with_its_root_module_is_refused() {
    let dir = PluginDir::new();
    let path = dir.add_built("drover_fixture_kind_mismatch");
    let err = dir.loader().load(&path, None).err().expect("refused");
    let text = err.to_string();
    assert!(matches!(err, LoadError::Manifest { .. }), "{text}");
    assert!(text.contains("expected kind authorizer"), "{text}");
    assert!(text.contains("found kind assignor"), "{text}");
}
