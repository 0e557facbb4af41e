//! The share-assignor suite (assignor ABI 3.3): what a plugin that serves share groups
//! (KIP-932) must meet through `Assignor::assign_share`, over proptest-generated
//! groups with a generated context ([`GeneratedContext`]: leaders and racks, offsets,
//! produce rates).
//!
//! | property | what |
//! |---|---|
//! | `share_supported` | `share_groups_supported` answers `true` (else the coordinator never offers the plugin a share group, and the rest is not run) |
//! | `share_contract` | for any valid group: every partition of a subscribed topic to at least one subscriber, each listing it once; only subscribed topics, no unknown topic or out-of-range partition; every member exactly once |
//! | `share_sorted_output` | members by id, topics by name, partitions strictly ascending |
//! | `share_empty_group` | no members: an empty assignment |
//! | `share_deterministic` | the same input and context twice: the same output |
//! | `share_member_order_independent` | members listed in another order: the same output |

use drover_abi::{
    assignor::AssignorArc,
    std_types::{RString, RVec},
    AssignInput, Assignment, TopicInfo,
};

use super::{
    builders::{permutation, reordered},
    context::GeneratedContext,
    contract::{check_order, check_share_rules},
    generate::{describe, group},
    Options,
};
use crate::{check::check, Report, Verdict};

/// Runs the share properties against `assignor` (from a loaded `.so`, or from
/// [`drover_abi::sdk::in_process::assignor`]) and reports each.
pub fn run(assignor: &AssignorArc, options: &Options) -> Report {
    let mut report = Report::new("share-assignor");
    if !assignor.share_groups_supported() {
        report.push(
            "share_supported",
            Verdict::Fail(
                "share_groups_supported() is false: the coordinator never offers this \
                 assignor a share group (an assignor built before assignor ABI 3.3 answers \
                 false)"
                    .to_owned(),
            ),
        );
        return report;
    }
    report.push("share_supported", Verdict::Pass);
    let assign = |input: &AssignInput| -> Result<Assignment, String> {
        GeneratedContext::for_input(input)
            .lend(|ctx| assignor.assign_share(input, ctx).into_result())
            .map_err(|e| format!("assign_share refused a valid input: {e}"))
    };
    let cases = options.cases;
    report.record(
        "share_contract",
        check(cases, group(), describe, |input| {
            check_share_rules(input, &assign(input)?)
        }),
    );
    report.record(
        "share_sorted_output",
        check(cases, group(), describe, |input| {
            check_order(&assign(input)?)
        }),
    );
    report.record("share_empty_group", {
        let input = AssignInput {
            group: RString::from("testkit"),
            members: RVec::new(),
            topics: RVec::from(vec![TopicInfo::new("t", 3)]),
        };
        assign(&input).and_then(|out| match out.members.len() {
            0 => Ok(()),
            n => Err(format!("no members, but the output lists {n}")),
        })
    });
    report.record(
        "share_deterministic",
        check(cases, group(), describe, |input| {
            let (first, second) = (assign(input)?, assign(input)?);
            if first == second {
                Ok(())
            } else {
                Err("the second call gave a different output".to_owned())
            }
        }),
    );
    report.record(
        "share_member_order_independent",
        check(
            cases,
            (group(), proptest::num::u64::ANY),
            |(input, _)| describe(input),
            |(input, seed)| {
                let shuffled = reordered(input, &permutation(input.members.len(), *seed));
                if assign(input)? == assign(&shuffled)? {
                    Ok(())
                } else {
                    Err("shuffled members gave a different output".to_owned())
                }
            },
        ),
    );
    report
}
