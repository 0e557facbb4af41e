//! The compatibility promise, proven: plugins built against the *previous* minor of each
//! kind's ABI (tests/compat, a frozen copy of drover-abi 3.0 and one fixture per kind)
//! load into this broker through the normal loader and pass their kind's checks, although
//! this broker's interfaces have grown since (coordinator 3.1: a new input variant;
//! offset store 3.1 and assignor 3.1: a new optional method).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use drover_abi::{
    coordinator::{CoordinatorInput, CoordinatorOutput, CoordinatorStartup, NamedAssignor},
    std_types::{RString, RVec},
    AssignInput, AssignorMember, ErrorKind, OffsetRecord, PluginKind, TopicInfo, TopicPartitions,
};
use drover_abi::{offset_store::OffsetStoreArc, PluginError};
use drover_host::plugins::{CallError, LivePlugins, LoadError, LoadedPlugin, PluginRegistry};
use drover_plugin_testkit::{assignor, offset_store};
use drover_tests::{compat_library, compat_library_3_4, load_assignor, PluginDir};
use sha2::{Digest, Sha256};

fn load(dir: &PluginDir, lib: &str, kind: PluginKind) -> LoadedPlugin {
    let path = dir.add_file(&compat_library(lib));
    let plugin = dir
        .loader()
        .load(&path, Some(kind))
        .unwrap_or_else(|e| panic!("a {kind} built against ABI 3.0 must load: {e}"));
    assert_eq!(plugin.summary.abi, "3.0", "{lib}");
    assert!(
        kind.abi_version()
            .accepts(drover_abi::KindVersion { major: 3, minor: 0 }),
        "the broker serves 3.x"
    );
    plugin
}

/// Digest of every file of the frozen tree, in path order (Cargo.lock excluded: it only
/// pins third-party crates).
fn frozen_digest(root: &Path) -> String {
    let mut files = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if path.is_dir() {
                stack.push(path);
            } else if name != "Cargo.lock" && name != "FROZEN.sha256" && name != "README.md" {
                files.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut hash = Sha256::new();
    for (name, bytes) in files {
        hash.update(name.as_bytes());
        hash.update([0]);
        hash.update((bytes.len() as u64).to_be_bytes());
        hash.update(&bytes);
    }
    hex::encode(hash.finalize())
}

#[test]
fn the_frozen_abi_and_fixtures_are_unchanged() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../compat");
    let recorded = std::fs::read_to_string(root.join("FROZEN.sha256")).unwrap();
    assert_eq!(
        frozen_digest(&root),
        recorded.trim(),
        "tests/compat is frozen: its ABI copy and fixtures stand for plugins already built \
         and must never change (add a new frozen tree for a new minor instead)"
    );
}

/// Group `g`: members `b` and `a` (in that order) on topic `t` with 3 partitions.
fn two_members_on_three_partitions() -> AssignInput {
    let member = |id: &str| AssignorMember {
        member_id: id.into(),
        topics: RVec::from(vec![RString::from("t")]),
        owned: RVec::new(),
        rack: None.into(),
        weight: 1,
    };
    AssignInput {
        group: "g".into(),
        members: RVec::from(vec![member("b"), member("a")]),
        topics: RVec::from(vec![TopicInfo::new("t", 3)]),
    }
}

#[test]
fn an_assignor_built_against_3_0_loads_and_assigns() {
    let dir = PluginDir::new();
    let plugin = load(&dir, "drover_compat_assignor_3_0", PluginKind::Assignor);
    let assignor = plugin.new_assignor("").unwrap_or_else(|e| panic!("{e}"));
    let input = two_members_on_three_partitions();
    let out = assignor.assign(&input).unwrap_or_else(|e| panic!("{e}"));
    let got: Vec<(String, Vec<i32>)> = out
        .members
        .iter()
        .map(|m| {
            let parts = m.partitions.iter().flat_map(|t| t.partitions.to_vec());
            (m.member_id.to_string(), parts.collect())
        })
        .collect();
    assert_eq!(got, [("a".into(), vec![0, 2]), ("b".into(), vec![1])]);
}

/// Assignor ABI 3.1 added `assign_with_context`; this assignor predates it, so the call
/// reaches the interface's default, which forwards to its `assign` (the context, full
/// here, is dropped).
#[test]
fn an_assignor_built_against_3_0_is_called_with_a_context_and_falls_back_to_assign() {
    let dir = PluginDir::new();
    let plugin = load(&dir, "drover_compat_assignor_3_0", PluginKind::Assignor);
    let assignor = plugin.new_assignor("").unwrap_or_else(|e| panic!("{e}"));
    let input = two_members_on_three_partitions();
    let context = assignor::GeneratedContext::for_input(&input);
    let with = context
        .lend(|ctx| assignor.assign_with_context(&input, ctx))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(with, assignor.assign(&input).unwrap());
}

#[test]
fn an_assignor_built_against_3_0_passes_the_assignor_suite() {
    let dir = PluginDir::new();
    let plugin = load(&dir, "drover_compat_assignor_3_0", PluginKind::Assignor);
    let instance = plugin.new_assignor("").unwrap_or_else(|e| panic!("{e}"));
    let report = assignor::run(&instance.instance(), &assignor::Options::default());
    assert!(report.passed(), "{report}");
}

fn open(plugin: &LoadedPlugin, config: &str) -> Result<OffsetStoreArc, PluginError> {
    match plugin.open_offset_store(config) {
        Ok(handle) => Ok(handle.instance()),
        Err(LoadError::Instantiate { error, .. }) => Err(error),
        Err(e) => Err(PluginError::internal(e.to_string())),
    }
}

#[test]
fn an_offset_store_built_against_3_0_passes_the_offset_store_suite_and_survives_sigkill() {
    let dir = PluginDir::new();
    let plugin = load(
        &dir,
        "drover_compat_offset_store_3_0",
        PluginKind::OffsetStore,
    );
    let config = format!(
        "path = {:?}\n",
        dir.scratch("journal").display().to_string()
    );
    let report = offset_store::run(
        &|| open(&plugin, &config),
        &offset_store::Options::default(),
    );
    assert!(report.passed(), "{report}");

    let group = format!("{}-crash", offset_store::unique_prefix());
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_drover-commit-load"));
    child
        .arg(dir.path().join("libdrover_compat_offset_store_3_0.so"))
        .arg(dir.scratch("child-cache"))
        .arg(&config)
        .arg(&group)
        .arg("16");
    let result =
        offset_store::crash::crash_safety(&mut child, &|| open(&plugin, &config), &group, 16, 300);
    assert_eq!(result, Ok(()));
}

/// Why the loader checks layouts with the plugin as the older side: abi_stable's own
/// check (host as the interface) refuses this store, built before offset-store ABI 3.1
/// added a method to the `OffsetStore` vtable, although it is safe to load (the test
/// above calls it).
#[test]
fn abi_stables_own_layout_check_would_refuse_the_older_store() {
    use abi_stable::library::{lib_header_from_path, LibraryError};
    let dir = PluginDir::new();
    let path = dir.add_file(&compat_library("drover_compat_offset_store_3_0"));
    let header = lib_header_from_path(&path).unwrap_or_else(|e| panic!("{e}"));
    let err = header
        .ensure_layout::<drover_abi::OffsetStoreModRef>()
        .expect_err("abi_stable refuses a library whose vtable has fewer methods");
    assert!(matches!(err, LibraryError::AbiInstability(_)), "{err}");
    assert!(err.to_string().contains("too many fields"), "{err}");
}

#[test]
fn an_offset_store_built_against_3_0_loads_and_its_missing_method_falls_back() {
    let dir = PluginDir::new();
    let plugin = load(
        &dir,
        "drover_compat_offset_store_3_0",
        PluginKind::OffsetStore,
    );
    let config = format!(
        "path = {:?}\n",
        dir.scratch("journal").display().to_string()
    );
    let store = plugin
        .open_offset_store(&config)
        .unwrap_or_else(|e| panic!("{e}"));
    let record = |partition, offset| OffsetRecord {
        group: "g".into(),
        topic: "t".into(),
        partition,
        offset,
        metadata: "m".into(),
        commit_time_ms: 1,
    };
    store.commit(&[record(0, 5), record(1, 6)]).unwrap();
    // Offset-store ABI 3.1 added `delete_partitions`; this store predates it, so the
    // call reaches the interface's default and reports Unsupported.
    let err = store
        .delete_partitions("g", &[TopicPartitions::new("t", vec![0])])
        .expect_err("a 3.0 store has no delete_partitions");
    assert!(
        matches!(&err, CallError::Plugin { error, .. } if error.kind == ErrorKind::Unsupported),
        "{err}"
    );
    assert_eq!(store.fetch_group("g").unwrap().len(), 2, "nothing deleted");
    store.close().unwrap();
    let reopened = plugin.open_offset_store(&config).unwrap();
    assert_eq!(
        reopened.fetch_group("g").unwrap(),
        vec![record(0, 5), record(1, 6)]
    );
    reopened.close().unwrap();
}

/// Offset-store ABI 3.2 added share-group state after `last_prefix_field`: a store
/// built before reads as keeping none (the interface's defaults, no call into it), and
/// the broker refuses it as a share-state target, naming it.
#[test]
fn an_offset_store_built_against_3_0_is_refused_as_a_share_state_target() {
    let dir = PluginDir::new();
    let plugin = load(
        &dir,
        "drover_compat_offset_store_3_0",
        PluginKind::OffsetStore,
    );
    let config = format!(
        "path = {:?}\n",
        dir.scratch("journal").display().to_string()
    );
    let store = std::sync::Arc::new(
        plugin
            .open_offset_store(&config)
            .unwrap_or_else(|e| panic!("{e}")),
    );
    assert!(!store.share_state_supported());
    let err = store
        .read_share_state("g", &[TopicPartitions::new("t", vec![0])])
        .expect_err("a 3.0 store keeps no share state");
    assert!(
        matches!(&err, CallError::Plugin { error, .. } if error.kind == ErrorKind::Unsupported),
        "{err}"
    );
    let stores = drover_host::offsets::OffsetStores::new(drover_host::offsets::NamedStore {
        name: "compat-3.0".into(),
        config,
        store: std::sync::Arc::clone(&store),
    });
    let refused = stores
        .write_share_state(&[])
        .expect_err("refused as a share-state target");
    let message = refused.to_string();
    assert!(
        message.contains("`compat-3.0` keeps no share-group state") && message.contains("3.2"),
        "{message}"
    );
    store.close().unwrap();
}

fn request(api_key: i16, correlation_id: i32) -> RVec<u8> {
    let mut frame = api_key.to_be_bytes().to_vec();
    frame.extend_from_slice(&0i16.to_be_bytes());
    frame.extend_from_slice(&correlation_id.to_be_bytes());
    RVec::from(frame)
}

#[test]
fn a_coordinator_built_against_3_0_keeps_the_contract_and_skips_newer_inputs() {
    let dir = PluginDir::new();
    let plugin = load(
        &dir,
        "drover_compat_coordinator_3_0",
        PluginKind::Coordinator,
    );
    let (_, range) = load_assignor("drover_assignor_range");
    let assignors = RVec::from(vec![NamedAssignor {
        name: RString::from("range"),
        assignor: range.instance(),
    }]);
    let startup = CoordinatorStartup {
        broker_id: 0,
        assignors: assignors.clone(),
        default_assignor: "range".into(),
        topics: RVec::new(),
    };
    let mut coordinator = plugin
        .start_coordinator("", startup)
        .unwrap_or_else(|e| panic!("{e}"));

    // Rule 1: an answer per request, in order.
    let mut answers = Vec::new();
    for corr in [7, 8] {
        let frame = CoordinatorInput::Frame {
            conn: 1,
            bytes: request(18, corr),
        };
        answers.extend(coordinator.handle(10, frame).unwrap());
    }
    let answered: Vec<_> = answers
        .iter()
        .map(|o| match o {
            CoordinatorOutput::Answer { conn: 1, bytes } => bytes.to_vec(),
            other => panic!("expected an answer, got {other:?}"),
        })
        .collect();
    assert_eq!(answered, [7i32.to_be_bytes(), 8i32.to_be_bytes()]);

    // Rule 2: a channel opens before its answer; rule 3: pushes go to channels.
    let out = coordinator
        .handle(
            20,
            CoordinatorInput::Frame {
                conn: 2,
                bytes: request(20_000, 1),
            },
        )
        .unwrap();
    assert!(
        matches!(out[0], CoordinatorOutput::ChannelOpened { conn: 2 }),
        "{out:?}"
    );
    assert!(
        matches!(out[1], CoordinatorOutput::Answer { conn: 2, .. }),
        "{out:?}"
    );
    let deadline = coordinator.poll_timeout().expect("a push is due");
    let out = coordinator
        .handle(deadline, CoordinatorInput::TimerFired)
        .unwrap();
    assert!(
        matches!(out[..], [CoordinatorOutput::Push { conn: 2, .. }]),
        "{out:?}"
    );

    // Coordinator ABI 3.1 added `AssignorsChanged`; a 3.0 plugin meets it as an unknown
    // variant and handles it explicitly (this one reports a metric).
    let out = coordinator
        .handle(
            30,
            CoordinatorInput::AssignorsChanged {
                assignors,
                default_assignor: "range".into(),
            },
        )
        .unwrap();
    assert!(
        matches!(&out[..], [CoordinatorOutput::Metric { name, value: 1 }] if name.as_str() == "unknown_inputs"),
        "{out:?}"
    );
    // Coordinator ABI 3.3 added `PartitionStats`. The broker's driver sends it only to
    // coordinators of 3.3 or later; were a 3.0 plugin handed it anyway, it would meet
    // an unknown variant as well, not fail.
    let table = drover_abi::assignor::TopicContext {
        topic: "t".into(),
        partitions: vec![drover_abi::assignor::PartitionContext::unknown(0)].into(),
    };
    let out = coordinator
        .handle(
            35,
            CoordinatorInput::PartitionStats {
                brokers: RVec::new(),
                topics: vec![table].into(),
            },
        )
        .unwrap();
    assert!(
        matches!(&out[..], [CoordinatorOutput::Metric { name, value: 1 }] if name.as_str() == "unknown_inputs"),
        "{out:?}"
    );
    // Coordinator ABI 3.4 added transactional offsets (TxnOffsetCommit, the inputs
    // `TxnOffsetsStaged`, `TxnOffsetsPending`, `TxnCompleted`). The broker's driver
    // reads the plugin's ABI: a coordinator older than 3.4 is neither routed
    // TxnOffsetCommit (the broker answers it COORDINATOR_NOT_AVAILABLE) nor sent those
    // inputs. Were it handed them anyway, they would be unknown variants too.
    {
        use drover_host::coordination::driver::Coordinator as _;
        let abi = coordinator.abi();
        assert_eq!((abi.major, abi.minor), (3, 0));
        assert!(abi.minor < 4, "the driver's gate for transactional inputs");
    }
    for input in [
        CoordinatorInput::TxnCompleted {
            op: 1,
            producer_id: 7,
            producer_epoch: 0,
            committed: true,
        },
        CoordinatorInput::TxnOffsetsPending {
            pending: RVec::new(),
        },
        CoordinatorInput::TxnOffsetsStaged {
            op: 2,
            error_code: 0,
        },
        // Coordinator ABI 3.9 added topic scopes; the driver sends them only to 3.9 or
        // later (with an authorizer).
        CoordinatorInput::TopicScope {
            conn: 1,
            topics: vec![RString::from("t")].into(),
        },
    ] {
        let out = coordinator.handle(38, input).unwrap();
        assert!(
            matches!(&out[..], [CoordinatorOutput::Metric { name, value: 1 }] if name.as_str() == "unknown_inputs"),
            "{out:?}"
        );
    }
    coordinator.shutdown(40).unwrap();
}

/// Assignor ABI 3.2 appended `partition_data_age_ms` to the `AssignContext` prefix. An
/// assignor built against 3.1 (tests/compat-3.4: the frozen drover-abi 3.4, whose
/// assignor ABI is 3.1, the first to read a context) loads into this broker, reads the
/// longer context it is handed as the layout it knows — labels, racks and partition
/// data — and passes the assignor suite, the context checks included.
#[test]
fn an_assignor_built_against_3_1_reads_the_longer_context_and_passes_the_suite() {
    let dir = PluginDir::new();
    let path = dir.add_file(&drover_tests::compat_library_3_4(
        "drover_compat_assignor_3_1",
    ));
    let plugin = dir
        .loader()
        .load(&path, Some(PluginKind::Assignor))
        .unwrap_or_else(|e| panic!("an assignor built against ABI 3.1 must load: {e}"));
    assert_eq!(plugin.summary.abi, "3.1");
    let instance = plugin.new_assignor("").unwrap_or_else(|e| panic!("{e}"));
    let report = assignor::run(&instance.instance(), &assignor::Options::default());
    assert!(report.passed(), "{report}");
    // It reads the partition data of the (longer) context: the laggiest partition of
    // the generated context goes to the first member.
    let input = two_members_on_three_partitions();
    let context = assignor::GeneratedContext::for_input(&input);
    let with = context
        .lend(|ctx| instance.assign_with_context(&input, ctx))
        .unwrap_or_else(|e| panic!("{e}"));
    let plain = instance.assign(&input).unwrap();
    assert_ne!(with, plain, "the context must change this assignment");
}

/// Assignor ABI 3.3 appended `share_groups_supported` and `assign_share` (share
/// groups, KIP-932). The assignor built against 3.1 still loads; it reads `false`
/// through the interface's default, so the coordinator's set never offers it a share
/// group, a share call reaches the default `Unsupported`, and the share suite stops at
/// `share_supported`. Its consumer-group assignments are unchanged (the suite above).
#[test]
fn an_assignor_built_against_3_1_is_never_offered_share_groups() {
    use drover_coordinator::{AssignorSet, Assignors};
    let dir = PluginDir::new();
    let path = dir.add_file(&drover_tests::compat_library_3_4(
        "drover_compat_assignor_3_1",
    ));
    let plugin = dir
        .loader()
        .load(&path, Some(PluginKind::Assignor))
        .unwrap_or_else(|e| panic!("an assignor built against ABI 3.1 must load: {e}"));
    let instance = plugin
        .new_assignor("")
        .unwrap_or_else(|e| panic!("{e}"))
        .instance();
    assert!(!instance.share_groups_supported());
    let input = two_members_on_three_partitions();
    let share = assignor::GeneratedContext::for_input(&input)
        .lend(|ctx| instance.assign_share(&input, ctx).into_result());
    assert_eq!(share.unwrap_err().kind, ErrorKind::Unsupported);
    let mut set = AssignorSet::new();
    set.insert("old", instance.clone());
    assert!(set.contains("old"));
    assert!(!set.share_groups_supported("old"));
    let report = assignor::share::run(&instance, &assignor::Options::default());
    assert!(!report.passed());
    assert_eq!(report.outcomes.len(), 1, "{report}");
    // As does the one built against 3.0.
    let old = load(&dir, "drover_compat_assignor_3_0", PluginKind::Assignor);
    let old = old
        .new_assignor("")
        .unwrap_or_else(|e| panic!("{e}"))
        .instance();
    assert!(!old.share_groups_supported());
}

#[test]
fn the_frozen_3_4_abi_and_fixture_are_unchanged() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../compat-3.4");
    let recorded = std::fs::read_to_string(root.join("FROZEN.sha256")).unwrap();
    assert_eq!(
        frozen_digest(&root),
        recorded.trim(),
        "tests/compat-3.4 is frozen"
    );
}

/// The plugins of the frozen trees, as users already built them: file, kind, name, ABI.
fn frozen_plugins() -> [(PathBuf, PluginKind, &'static str, &'static str); 4] {
    use PluginKind::{Assignor, Coordinator, OffsetStore};
    [
        (
            compat_library("drover_compat_assignor_3_0"),
            Assignor,
            "compat-round-robin",
            "3.0",
        ),
        (
            compat_library("drover_compat_offset_store_3_0"),
            OffsetStore,
            "compat-journal",
            "3.0",
        ),
        (
            compat_library("drover_compat_coordinator_3_0"),
            Coordinator,
            "compat-echo",
            "3.0",
        ),
        (
            compat_library_3_4("drover_compat_assignor_3_1"),
            Assignor,
            "compat-lag-deal",
            "3.1",
        ),
    ]
}

/// Checks that `find` finds every frozen plugin, loaded from `dir`, of its ABI.
fn assert_frozen_loaded(dir: &PluginDir, find: impl Fn(PluginKind, &str) -> Option<LoadedPlugin>) {
    for (source, kind, name, abi) in frozen_plugins() {
        let plugin = find(kind, name).unwrap_or_else(|| panic!("{kind} `{name}` not loaded"));
        assert_eq!(plugin.path, dir.path().join(source.file_name().unwrap()));
        assert_eq!(plugin.summary.abi, abi, "{name}");
    }
}

/// Open plugin kinds, proven with the frozen fixtures: the plugins built against
/// drover-abi 3.0 and 3.4 — whose manifests carry the frozen three-kind enum — load in
/// the same scan as an authorizer (a kind added since, with an `OpenManifest`), and a
/// plugin of a kind this broker does not know is refused alone.
#[test]
fn the_frozen_plugins_load_in_one_scan_beside_an_authorizer_and_a_future_kind_is_refused() {
    let dir = PluginDir::new();
    for (source, ..) in frozen_plugins() {
        dir.add_file(&source);
    }
    let authorizer = dir.add_built("drover_fixture_panicking_authorizer");
    let future = dir.add_built("drover_fixture_future_kind");
    let registry = PluginRegistry::scan(&dir.loader(), &dir.path()).unwrap();
    let refused: Vec<String> = registry.refused().map(|e| e.to_string()).collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].starts_with(&future.display().to_string()),
        "{refused:?}"
    );
    assert!(refused[0].contains("`drover_quota`"), "{refused:?}");
    assert_eq!(registry.loaded().count(), 5);
    assert_frozen_loaded(&dir, |kind, name| registry.find(kind, name).cloned());
    let authz = registry.find(PluginKind::Authorizer, "panicking").unwrap();
    assert_eq!(authz.path, authorizer);
    authz.new_authorizer("", None).unwrap();
}

/// The same through a live rescan: a broker running the frozen plugins gains an
/// authorizer, and a plugin of an unknown kind changes nothing.
#[test]
fn a_rescan_adds_an_authorizer_beside_the_frozen_plugins_and_refuses_a_future_kind() {
    let dir = PluginDir::new();
    for (source, ..) in frozen_plugins() {
        dir.add_file(&source);
    }
    let registry = PluginRegistry::scan(&dir.loader(), &dir.path()).unwrap();
    assert_eq!(registry.refused().count(), 0);
    let live = LivePlugins::new(&registry, &Default::default(), dir.loader(), 64);
    dir.add_built("drover_fixture_panicking_authorizer");
    dir.add_built("drover_fixture_future_kind");
    let start = |p: &LoadedPlugin| p.new_assignor("").map_err(|e| e.to_string());
    let report = live
        .rescan("compat-round-robin", &start, &|_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    let added: Vec<(&str, &str)> = report
        .added
        .iter()
        .map(|c| (c.kind.as_str(), c.name.as_str()))
        .collect();
    assert_eq!(added, [("authorizer", "panicking")], "{report:?}");
    assert!(
        report.removed.is_empty() && report.replaced.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.refused.len(), 1, "{report:?}");
    assert_eq!(report.refused[0].file, "libdrover_fixture_future_kind.so");
    assert!(
        report.refused[0].reason.contains("later Drover release"),
        "{report:?}"
    );
    assert_eq!(report.unchanged, 4, "{report:?}");
    assert_frozen_loaded(&dir, |kind, name| live.find(kind, name));
    assert!(live.find(PluginKind::Authorizer, "panicking").is_some());
}
