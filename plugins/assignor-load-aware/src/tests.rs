//! Unit and property tests of `load-aware`: config, the test kit's suite (with the
//! balance and stickiness it claims), load by rate, lag and count, weights, rack
//! preference, stickiness within the band; proptest invariants over generated groups
//! with generated rates.

use std::collections::BTreeMap;

use drover_abi::{
    assignor::{AssignContext, BrokerContext, MemberContext, PartitionContext, TopicContext},
    sdk::{assignor::Context, AssignorPlugin, PluginContext},
    std_types::{RSlice, RSome, RString},
    AssignInput, Assignment, ErrorKind,
};
use drover_plugin_testkit::assignor::{
    builders::{holders, input, member, with_owned},
    contract::check_contract,
    generate::group,
};
use proptest::prelude::*;

use crate::{Config, LoadAwareAssignor};

/// Partition data for a test: per topic, per partition, (bytes/s, lag, leader broker);
/// brokers `0..` with the given racks.
#[derive(Default)]
struct Stats {
    brokers: Vec<BrokerContext>,
    topics: Vec<TopicContext>,
}

impl Stats {
    fn racks(racks: &[&str]) -> Self {
        Stats {
            brokers: racks
                .iter()
                .enumerate()
                .map(|(i, r)| BrokerContext {
                    broker_id: i as i32,
                    rack: RSome(RString::from(*r)),
                })
                .collect(),
            topics: Vec::new(),
        }
    }

    /// `topic`'s partitions with these (bytes/s, lag, leader); `None` leaves one out.
    fn topic(mut self, topic: &str, parts: &[(Option<f64>, Option<i64>, Option<i32>)]) -> Self {
        let partitions = parts
            .iter()
            .enumerate()
            .map(|(p, &(rate, lag, leader))| {
                let mut pc = PartitionContext::unknown(p as i32);
                pc.produce_bytes_per_sec = rate.into();
                if let Some(lag) = lag {
                    pc.log_end_offset = RSome(1_000_000);
                    pc.committed_offset = RSome(1_000_000 - lag);
                }
                pc.leader = leader.into();
                pc
            })
            .collect();
        self.topics.push(TopicContext {
            topic: topic.into(),
            partitions,
        });
        self
    }

    /// `topic` with these rates, every partition led by broker 0.
    fn rates(self, topic: &str, rates: &[f64]) -> Self {
        let parts: Vec<_> = rates.iter().map(|&r| (Some(r), None, Some(0))).collect();
        self.topic(topic, &parts)
    }

    fn assign(&self, assignor: &LoadAwareAssignor, input: &AssignInput) -> Assignment {
        let members: Vec<MemberContext> = Vec::new();
        AssignContext {
            members: RSlice::from_slice(&members),
            brokers: RSlice::from_slice(&self.brokers),
            topics: RSlice::from_slice(&self.topics),
            partition_data_age_ms: drover_abi::std_types::ROption::RNone,
        }
        .lend(|raw| assignor.assign_with_context(input, &Context::new(raw)))
        .expect("assign")
    }
}

fn tolerance(t: f64) -> LoadAwareAssignor {
    LoadAwareAssignor::with_config(Config { tolerance: t })
}

fn racked(
    id: &str,
    topics: &[&str],
    rack: Option<&str>,
    weight: u32,
) -> drover_abi::AssignorMember {
    let mut m = member(id, topics);
    m.rack = rack.map(RString::from).into();
    m.weight = weight;
    m
}

/// Member id → its partitions as (topic, partition).
fn by_member(out: &Assignment) -> BTreeMap<String, Vec<(String, i32)>> {
    out.members
        .iter()
        .map(|m| {
            let parts = m
                .partitions
                .iter()
                .flat_map(|tp| tp.partitions.iter().map(|&p| (tp.topic.to_string(), p)))
                .collect();
            (m.member_id.to_string(), parts)
        })
        .collect()
}

fn counts(out: &Assignment) -> Vec<usize> {
    by_member(out).values().map(Vec::len).collect()
}

/// Member id → summed rate of its partitions under `rate(topic, p)`.
fn sums(out: &Assignment, rate: impl Fn(&str, i32) -> f64) -> Vec<f64> {
    by_member(out)
        .values()
        .map(|ps| ps.iter().map(|(t, p)| rate(t, *p)).sum())
        .collect()
}

#[test]
fn config_defaults_accepts_tolerance_and_refuses_the_rest() {
    assert_eq!(Config::parse("").unwrap().tolerance, 0.1);
    assert_eq!(Config::parse("tolerance = 0.25").unwrap().tolerance, 0.25);
    assert_eq!(Config::parse("tolerance = 1").unwrap().tolerance, 1.0);
    for bad in [
        "tolerance = -0.1",
        "tolerance = 11.0",
        "tolerance = \"x\"",
        "other = 1",
        "= =",
    ] {
        let ctx = PluginContext {
            config: bad.into(),
            ..PluginContext::default()
        };
        let err = LoadAwareAssignor::new(&ctx).expect_err(bad);
        assert_eq!(err.kind, ErrorKind::InvalidConfig, "{bad}");
    }
}

/// The test kit's suite in-process: the contract, determinism, the context path, and
/// the balance and stickiness it claims (with nothing measured it balances by count).
#[test]
fn passes_the_testkit_suite_balanced_and_sticky() {
    use drover_plugin_testkit::assignor::{run, Claim, Claims, Options};
    let instance = drover_abi::sdk::in_process::assignor::<LoadAwareAssignor>("").expect("new");
    let claims = Claims::none().with(Claim::Balanced).with(Claim::Sticky);
    run(&instance, &Options::new(claims)).assert_passed();
}

/// Two topics, one with 20× the rate of the other; two members: by rate each gets two
/// hot and two cold partitions (equal sums), where by count `sticky` would hand one
/// member the whole hot topic.
#[test]
fn balances_summed_rates_not_counts() {
    let input = input(
        vec![member("a", &["cold", "hot"]), member("b", &["cold", "hot"])],
        &[("cold", 4), ("hot", 4)],
    );
    let stats = Stats::default()
        .rates("cold", &[100.0; 4])
        .rates("hot", &[2000.0; 4]);
    let out = stats.assign(&LoadAwareAssignor::default(), &input);
    let rate = |t: &str, _| if t == "hot" { 2000.0 } else { 100.0 };
    assert_eq!(sums(&out, rate), vec![4200.0, 4200.0]);
}

/// A member that owns the whole group and a newcomer: partitions move, heaviest first,
/// until the two are within the band (10% of the fair share).
#[test]
fn a_newcomer_gets_load_until_within_the_band() {
    let all: Vec<i32> = (0..4).collect();
    let owner = drover_plugin_testkit::assignor::builders::owning(
        member("a", &["cold", "hot"]),
        &[("cold", &all), ("hot", &all)],
    );
    let input = input(
        vec![owner, member("b", &["cold", "hot"])],
        &[("cold", 4), ("hot", 4)],
    );
    let stats = Stats::default()
        .rates("cold", &[100.0; 4])
        .rates("hot", &[2000.0; 4]);
    let out = stats.assign(&LoadAwareAssignor::default(), &input);
    let rate = |t: &str, _| if t == "hot" { 2000.0 } else { 100.0 };
    let s = sums(&out, rate);
    let fair = 8400.0 / 2.0;
    assert!((s[0] - s[1]).abs() <= 0.1 * fair, "{s:?}");
    assert_eq!(
        by_member(&out)["b"]
            .iter()
            .filter(|(t, _)| t == "hot")
            .count(),
        2
    );
}

/// Rates zero everywhere, lag known: lag decides.
#[test]
fn lag_is_the_fallback_when_rates_are_zero() {
    let input = input(vec![member("a", &["t"]), member("b", &["t"])], &[("t", 4)]);
    let stats = Stats::default().topic(
        "t",
        &[
            (Some(0.0), Some(900), Some(0)),
            (Some(0.0), Some(800), Some(0)),
            (Some(0.0), Some(100), Some(0)),
            (Some(0.0), Some(0), Some(0)),
        ],
    );
    let out = stats.assign(&LoadAwareAssignor::default(), &input);
    let lag = [900.0, 800.0, 100.0, 0.0];
    let s = sums(&out, |_, p| lag[p as usize]);
    // Heaviest first: 900 → a, 800 → b, 100 → b, 0 (floor) → b or a; a 900, b 900.
    assert_eq!(s, vec![900.0, 900.0]);
}

/// Nothing measured: partition count, split by weight.
#[test]
fn weights_split_counts_when_nothing_is_measured() {
    let input = input(
        vec![
            racked("a1", &["t"], None, 1),
            racked("a2", &["t"], None, 1),
            racked("b", &["t"], None, 2),
        ],
        &[("t", 12)],
    );
    let out = LoadAwareAssignor::default().assign(&input).unwrap();
    assert_eq!(counts(&out), vec![3, 3, 6]);
}

/// Weights 1, 1, 2 in racks a, a, b; every partition led in rack b. With a band of
/// half a fair share (1.5 partitions) the rack-b member takes more than its weight's
/// share (8 of 12, not 6: 4 per unit of weight against 2 is within one partition plus
/// the band, and a move to a rack-a member would narrow the gap by less than the band);
/// without a band, or without racks, weight alone decides.
#[test]
fn the_leader_rack_is_preferred_within_the_band() {
    let members = |rack_b: Option<&str>| {
        vec![
            racked("a1", &["t"], Some("a"), 1),
            racked("a2", &["t"], Some("a"), 1),
            racked("b", &["t"], rack_b, 2),
        ]
    };
    let stats = Stats::racks(&["b"]).topic("t", &[(None, None, Some(0)); 12]);
    let racked_in = input(members(Some("b")), &[("t", 12)]);
    assert_eq!(
        counts(&stats.assign(&tolerance(0.5), &racked_in)),
        vec![2, 2, 8]
    );
    assert_eq!(
        counts(&stats.assign(&tolerance(0.0), &racked_in)),
        vec![3, 3, 6]
    );
    let unracked = input(members(None), &[("t", 12)]);
    assert_eq!(
        counts(&stats.assign(&tolerance(0.5), &unracked)),
        vec![3, 3, 6]
    );
}

/// Owned partitions stay while the gap is within the band, and move beyond it.
#[test]
fn owned_partitions_stay_within_the_band() {
    let owning = drover_plugin_testkit::assignor::builders::owning;
    let input = input(
        vec![
            owning(member("a", &["t"]), &[("t", &[0, 1])]),
            owning(member("b", &["t"]), &[("t", &[2, 3])]),
        ],
        &[("t", 4)],
    );
    // a 1050, b 950: a gap of 100 against a band of 0.1 × 1000.
    let near = Stats::default().rates("t", &[525.0, 525.0, 475.0, 475.0]);
    let out = near.assign(&LoadAwareAssignor::default(), &input);
    assert_eq!(
        holders(&out),
        holders(&near.assign(&tolerance(10.0), &input))
    );
    assert_eq!(by_member(&out)["a"], [("t".into(), 0), ("t".into(), 1)]);
    // a 1600, b 400: beyond the band; a's lighter... any move narrowing the gap happens.
    let far = Stats::default().rates("t", &[800.0, 800.0, 200.0, 200.0]);
    let out = far.assign(&LoadAwareAssignor::default(), &input);
    let s = sums(&out, |_, p| [800.0, 800.0, 200.0, 200.0][p as usize]);
    assert_eq!(s, vec![1000.0, 1000.0]);
}

/// A move must narrow the gap by more than the band: m1 owns p0 (0.97), m2 p1 (1.00)
/// and p2 (0.99), band 0.1 × 1.48. Giving p1 to m1 would put m1 at 1.97, above m2's
/// 1.99 minus the band, and the next move would give p0 back to m2: a swap under a
/// steady load. Nothing moves.
#[test]
fn no_swap_under_a_steady_load() {
    let owning = drover_plugin_testkit::assignor::builders::owning;
    let input = input(
        vec![
            owning(member("m1", &["t"]), &[("t", &[0])]),
            owning(member("m2", &["t"]), &[("t", &[1, 2])]),
        ],
        &[("t", 3)],
    );
    let stats = Stats::default().rates("t", &[0.97, 1.00, 0.99]);
    let out = stats.assign(&tolerance(0.1), &input);
    assert_eq!(by_member(&out)["m1"], [("t".into(), 0)]);
    assert_eq!(by_member(&out)["m2"], [("t".into(), 1), ("t".into(), 2)]);
}

/// `tolerance = 0` with rates equal but for measurement noise: m1 holds three
/// partitions (1.001, 1.001, 0.995), m2 and m3 two each (0.999 and 1.000). Giving
/// m1's lightest to m3 would lower the top level by 0.004, a rounding error of what
/// moves: it would rotate a partition at every re-run. Nothing moves.
#[test]
fn no_rotation_on_noise_with_a_zero_band() {
    let owning = drover_plugin_testkit::assignor::builders::owning;
    let input = input(
        vec![
            owning(member("m1", &["t"]), &[("t", &[0, 1, 2])]),
            owning(member("m2", &["t"]), &[("t", &[3, 4])]),
            owning(member("m3", &["t"]), &[("t", &[5, 6])]),
        ],
        &[("t", 7)],
    );
    let stats = Stats::default().rates("t", &[1.001, 1.001, 0.995, 1.0, 1.0, 0.999, 0.999]);
    let out = stats.assign(&tolerance(0.0), &input);
    assert_eq!(counts(&out), [3, 2, 2]);
    assert_eq!(by_member(&out)["m3"], [("t".into(), 5), ("t".into(), 6)]);
    // A real imbalance still moves with a zero band: 4, 2, 1 becomes 3, 2, 2.
    let input = input_owning(&[&[0, 1, 2, 3], &[4, 5], &[6]]);
    let out = stats.assign(&tolerance(0.0), &input);
    assert_eq!(counts(&out), [3, 2, 2]);
}

/// Members m1.. owning the given partitions of `t` (7 partitions).
fn input_owning(owned: &[&[i32]]) -> AssignInput {
    let owning = drover_plugin_testkit::assignor::builders::owning;
    let names = ["m1", "m2", "m3"];
    input(
        owned
            .iter()
            .zip(names)
            .map(|(ps, name)| owning(member(name, &["t"]), &[("t", ps)]))
            .collect(),
        &[("t", 7)],
    )
}

/// Rates for `input`: per topic, per partition from `seed` (integers 100..=10,000, so
/// sums are exact), every partition known, led by broker `p % 2` in rack `rack-{p%2}`.
fn generated_stats(input: &AssignInput, seed: &[u16]) -> Stats {
    let mut stats = Stats::racks(&["rack-0", "rack-1"]);
    let mut k = 0;
    for t in input.topics.iter() {
        let parts: Vec<_> = (0..t.partitions)
            .map(|p| {
                let r = 100.0 + f64::from(seed[k % seed.len()] % 9_901);
                k += 1;
                (Some(r), None, Some((p % 2) as i32))
            })
            .collect();
        stats = stats.topic(t.name.as_str(), &parts);
    }
    stats
}

fn rate_of(stats: &Stats, topic: &str, p: i32) -> f64 {
    let t = stats
        .topics
        .iter()
        .find(|t| t.topic.as_str() == topic)
        .unwrap();
    t.partitions[p as usize].produce_bytes_per_sec.unwrap()
}

/// Per member id: (summed rate, weight, its topics).
fn levels(out: &Assignment, input: &AssignInput, stats: &Stats) -> BTreeMap<String, (f64, f64)> {
    let by = by_member(out);
    input
        .members
        .iter()
        .map(|m| {
            let sum = by[m.member_id.as_str()]
                .iter()
                .map(|(t, p)| rate_of(stats, t, *p))
                .sum();
            (m.member_id.to_string(), (sum, f64::from(m.weight.max(1))))
        })
        .collect()
}

/// The assignor's band: `tolerance` × the load of the topics some member subscribes to
/// ÷ the weight of the members that subscribe to one with partitions. Topics nobody
/// subscribes to are outside the group's view, so their load does not count (counting
/// it made the band wider than the assignor's and the stickiness property fail on
/// inputs with such a topic).
fn band(input: &AssignInput, stats: &Stats, tolerance: f64) -> f64 {
    let subscribed = |topic: &str| {
        input
            .members
            .iter()
            .any(|m| m.topics.iter().any(|t| t.as_str() == topic))
    };
    let total: f64 = stats
        .topics
        .iter()
        .filter(|t| subscribed(t.topic.as_str()))
        .flat_map(|t| t.partitions.iter())
        .map(|p| p.produce_bytes_per_sec.unwrap())
        .sum();
    let weight: f64 = input
        .members
        .iter()
        .filter(|m| {
            m.topics.iter().any(|t| {
                input
                    .topics
                    .iter()
                    .any(|x| x.name == *t && x.partitions > 0)
            })
        })
        .map(|m| f64::from(m.weight.max(1)))
        .sum();
    tolerance * total / weight
}

fn seeds() -> impl Strategy<Value = Vec<u16>> {
    prop::collection::vec(any::<u16>(), 1..64)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    /// Every partition of a subscribed topic to exactly one subscriber, with rates.
    #[test]
    fn meets_the_contract_with_rates(input in group(), seed in seeds()) {
        let stats = generated_stats(&input, &seed);
        let out = stats.assign(&LoadAwareAssignor::default(), &input);
        prop_assert_eq!(check_contract(&input, &out), Ok(()));
    }

    /// From scratch, no member `d` is above another subscriber `r` of one of its
    /// partitions' topics by more than the band, per unit of weight, unless that
    /// partition alone would lift `r` to `d`'s level minus the band: weights are
    /// respected within one partition's rate plus the band.
    #[test]
    fn weights_are_respected_within_one_partition(input in group(), seed in seeds()) {
        let stats = generated_stats(&input, &seed);
        let out = stats.assign(&LoadAwareAssignor::default(), &input);
        let lv = levels(&out, &input, &stats);
        let band = band(&input, &stats, 0.1);
        let subs = |topic: &str| -> Vec<String> {
            input.members.iter().filter(|m| m.topics.iter().any(|t| t == topic))
                .map(|m| m.member_id.to_string()).collect()
        };
        for (d, parts) in by_member(&out) {
            let (ld, wd) = lv[&d];
            for (t, p) in parts {
                let rate = rate_of(&stats, &t, p);
                for r in subs(&t) {
                    let (lr, wr) = lv[&r];
                    let gap = ld / wd - lr / wr;
                    let after = lr / wr + rate / wr;
                    prop_assert!(
                        gap <= band + 1e-6
                            || after >= ld / wd - band - 1e-6
                            || ld / wd - after < 0.1 * rate / wr + 1e-6,
                        "{d} at {} and {r} at {} (band {band}) could move {t}/{p} ({rate})",
                        ld / wd, lr / wr
                    );
                }
            }
        }
    }

    /// Fed back as owned partitions with every rate changed by at most ±4%: nothing
    /// moves unless the fed-back assignment is out of the band under the new rates;
    /// with the same rates nothing moves at all.
    #[test]
    fn sticky_within_the_band(input in group(), seed in seeds(), drift in prop::collection::vec(-4i32..=4, 1..16)) {
        let stats = generated_stats(&input, &seed);
        let assignor = LoadAwareAssignor::default();
        let out = stats.assign(&assignor, &input);
        let again = with_owned(&input, &out);
        prop_assert_eq!(holders(&stats.assign(&assignor, &again)), holders(&out));

        let mut drifted = generated_stats(&input, &seed);
        let mut k = 0;
        for t in drifted.topics.iter_mut() {
            for p in t.partitions.iter_mut() {
                let r = p.produce_bytes_per_sec.unwrap();
                p.produce_bytes_per_sec = RSome((r * (100 + drift[k % drift.len()]) as f64 / 100.0).round());
                k += 1;
            }
        }
        let moved = holders(&drifted.assign(&assignor, &again)) != holders(&out);
        if moved {
            let lv = levels(&out, &input, &drifted);
            let per: Vec<f64> = lv.values().map(|(l, w)| l / w).collect();
            let band = band(&input, &drifted, 0.1);
            let spread = per.iter().cloned().fold(f64::MIN, f64::max)
                - per.iter().cloned().fold(f64::MAX, f64::min);
            prop_assert!(spread > band, "moved though the spread {spread} is within the band {band}");
        }
    }
}
