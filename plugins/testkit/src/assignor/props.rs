//! The assignor properties (listed in the module docs of [`super`]).

use std::collections::BTreeMap;

use drover_abi::{
    assignor::AssignorArc,
    std_types::{RString, RVec},
    AssignInput, Assignment, ErrorKind, TopicInfo,
};
use proptest::sample::Index;

use super::{
    builders::{holders, loads, member, permutation, reordered, with_owned, without},
    context::{with_context, with_empty_context},
    contract::{check_order, check_rules},
    generate::{describe, group, homogeneous},
    Claim, Options,
};
use crate::{check::check, Report, Verdict};

pub(super) fn run(assignor: &AssignorArc, options: &Options) -> Report {
    let assign = |input: &AssignInput| -> Result<Assignment, String> {
        assignor
            .assign(input)
            .into_result()
            .map_err(|e| format!("assign refused a valid input: {e}"))
    };
    let cases = options.cases;
    let mut report = Report::new("assignor");

    report.record(
        "contract",
        check(cases, group(), describe, |input| {
            check_rules(input, &assign(input)?)
        }),
    );
    report.record(
        "sorted_output",
        check(cases, group(), describe, |input| {
            check_order(&assign(input)?)
        }),
    );
    report.record("empty_group", empty_group(&assign));
    report.record(
        "refuses_duplicate_member",
        refuses(assignor, duplicate_member(), "a member id listed twice"),
    );
    report.record(
        "refuses_duplicate_topic",
        refuses(assignor, duplicate_topic(), "a topic listed twice"),
    );
    report.record(
        "deterministic",
        check(cases, group(), describe, |input| {
            let (first, second) = (assign(input)?, assign(input)?);
            same(&first, &second, "the second call")
        }),
    );
    report.record(
        "member_order_independent",
        check(
            cases,
            (group(), proptest::num::u64::ANY),
            |(input, _)| describe(input),
            |(input, seed)| {
                let shuffled = reordered(input, &permutation(input.members.len(), *seed));
                same(&assign(input)?, &assign(&shuffled)?, "shuffled members")
            },
        ),
    );

    report.record(
        "context_contract",
        check(cases, group(), describe, |input| {
            let out = with_context(assignor, input)?;
            check_rules(input, &out)?;
            check_order(&out)?;
            same(&out, &with_context(assignor, input)?, "the second call")
        }),
    );
    report.record(
        "empty_context_is_assign",
        check(cases, group(), describe, |input| {
            same(
                &assign(input)?,
                &with_empty_context(assignor, input)?,
                "assign_with_context with an empty context",
            )
        }),
    );

    let claimed = |claim: Claim| options.claims.contains(claim);
    if claimed(Claim::Balanced) {
        report.record(
            "balanced",
            check(cases, homogeneous(), describe, |input| {
                let loads = loads(&assign(input)?);
                let (min, max) = (loads.iter().min(), loads.iter().max());
                match (min, max) {
                    (Some(min), Some(max)) if max - min > 1 => Err(format!(
                        "identical subscriptions, member loads {loads:?} differ by more than one"
                    )),
                    _ => Ok(()),
                }
            }),
        );
    } else {
        report.push("balanced", not_claimed(Claim::Balanced));
    }
    if claimed(Claim::Sticky) {
        let refeed = check(cases, group(), describe, |input| {
            let out = assign(input)?;
            let again = assign(&with_owned(input, &out))?;
            same(&out, &again, "the assignment fed back as owned partitions")
        });
        let leaver = || {
            check(
                cases,
                (homogeneous(), proptest::arbitrary::any::<Index>()),
                |(input, _)| describe(input),
                |(input, pick)| only_leaver_moves(&assign, input, pick),
            )
        };
        report.record("sticky", refeed.and_then(|()| leaver()));
    } else {
        report.push("sticky", not_claimed(Claim::Sticky));
    }
    report
}

fn not_claimed(claim: Claim) -> Verdict {
    Verdict::Skip(format!(
        "not claimed (pass the claim `{claim}` to check it)"
    ))
}

fn same(first: &Assignment, second: &Assignment, what: &str) -> Result<(), String> {
    if first == second {
        return Ok(());
    }
    let (a, b) = (holders(first), holders(second));
    let name = |m: Option<&String>| m.map_or("nobody".to_owned(), |m| format!("`{m}`"));
    let moved = a
        .keys()
        .chain(b.keys())
        .find(|tp| a.get(*tp) != b.get(*tp))
        .map(|(t, p)| {
            let key = (t.clone(), *p);
            format!(
                "partition {p} of `{t}` went to {}, then to {}",
                name(a.get(&key)),
                name(b.get(&key))
            )
        });
    Err(format!(
        "{what} gave a different output: {}",
        moved.unwrap_or_else(|| "same owners, different layout".to_owned())
    ))
}

fn empty_group(assign: &dyn Fn(&AssignInput) -> Result<Assignment, String>) -> Result<(), String> {
    let input = AssignInput {
        group: RString::from("testkit"),
        members: RVec::new(),
        topics: RVec::from(vec![TopicInfo::new("t", 3)]),
    };
    let out = assign(&input)?;
    if out.members.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "no members, but the output lists {}",
            out.members.len()
        ))
    }
}

fn duplicate_member() -> AssignInput {
    AssignInput {
        group: RString::from("testkit"),
        members: RVec::from(vec![member("a", &["t"]), member("a", &["t"])]),
        topics: RVec::from(vec![TopicInfo::new("t", 3)]),
    }
}

fn duplicate_topic() -> AssignInput {
    AssignInput {
        group: RString::from("testkit"),
        members: RVec::from(vec![member("a", &["t"]), member("b", &["t"])]),
        topics: RVec::from(vec![TopicInfo::new("t", 3), TopicInfo::new("t", 5)]),
    }
}

/// `input` must be refused with `InvalidInput`.
fn refuses(assignor: &AssignorArc, input: AssignInput, what: &str) -> Result<(), String> {
    match assignor.assign(&input).into_result() {
        Err(e) if e.kind == ErrorKind::InvalidInput => Ok(()),
        Err(e) => Err(format!(
            "{what} was refused with {e}, expected kind InvalidInput"
        )),
        Ok(_) => Err(format!(
            "{what} was accepted; expected an InvalidInput error"
        )),
    }
}

/// One member leaves a group with identical subscriptions, the others owning what they
/// got: only the leaver's partitions may move.
fn only_leaver_moves(
    assign: &dyn Fn(&AssignInput) -> Result<Assignment, String>,
    input: &AssignInput,
    pick: &Index,
) -> Result<(), String> {
    if input.members.len() < 2 {
        return Ok(());
    }
    let before = assign(input)?;
    let leaver = pick.get(&input.members).member_id.to_string();
    let after = assign(&with_owned(&without(input, &leaver), &before))?;
    let after: BTreeMap<_, _> = holders(&after);
    for ((topic, p), old) in holders(&before) {
        if old == leaver {
            continue;
        }
        match after.get(&(topic.clone(), p)) {
            Some(new) if *new == old => {}
            new => {
                return Err(format!(
                    "`{leaver}` left and partition {p} of `{topic}` moved from `{old}` to {}",
                    new.map_or("nobody".to_owned(), |m| format!("`{m}`"))
                ))
            }
        }
    }
    Ok(())
}
