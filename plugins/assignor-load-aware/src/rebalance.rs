//! The rebalancing pass: moves partitions from members above the tolerance band to
//! members below it, until no move both crosses the band and narrows the gap.

use crate::{level::Level, state::State};

/// At most this many passes over the members; a pass that moves nothing ends it
/// sooner (and every move strictly lowers the sorted vector of loads per weight, so
/// the passes end by themselves long before in practice).
const MAX_PASSES: usize = 64;

/// Moves partitions while one can move: member `d` gives partition `g` to a subscriber
/// `r` of `g`'s topic when `d`'s load per unit of weight exceeds `r`'s by more than the
/// band *and* `r`'s after taking `g` stays below `d`'s before. Among the possible moves
/// of a donor it takes the one to a member in `g`'s leader rack first, then one whose
/// leader rack is not the donor's, then the heaviest partition (ties: the smaller
/// global id); the receiver is the eligible subscriber lowest after taking `g`
/// (preferring the leader's rack).
///
/// When it ends by itself (a pass without a move), no such move is left: no member is
/// above another subscriber of one of its partitions' topics by more than the band
/// unless that partition alone would put the other at least as high — balance by
/// weight within the band or within one partition's load.
pub(crate) fn run(state: &mut State<'_>) {
    let members = state.view.members().len();
    let mut held: Vec<Vec<u32>> = vec![Vec::new(); members];
    for (g, &m) in state.owners.iter().enumerate() {
        held[m as usize].push(g as u32);
    }
    let subscribing: Vec<u32> = (0..members as u32)
        .filter(|&m| !state.view.members()[m as usize].topics.is_empty())
        .collect();
    let lowest = |state: &State<'_>| {
        subscribing
            .iter()
            .map(|&m| state.per_weight(m))
            .fold(f64::INFINITY, f64::min)
    };
    let mut receivers = Vec::new();
    let mut min = lowest(state);
    for _ in 0..MAX_PASSES {
        let mut order = subscribing.clone();
        order.sort_by_key(|&m| (std::cmp::Reverse(Level(state.per_weight(m))), m));
        let mut moved = false;
        for d in order {
            loop {
                let top = state.per_weight(d);
                if top - min <= state.band {
                    break;
                }
                receivers.clear();
                receivers.extend(
                    subscribing
                        .iter()
                        .copied()
                        .filter(|&r| top - state.per_weight(r) > state.band),
                );
                if receivers.is_empty() {
                    break;
                }
                let Some((g, r)) = best_move(state, d, &held[d as usize], &receivers) else {
                    break;
                };
                state.shift(g, r);
                let list = &mut held[d as usize];
                if let Some(i) = list.iter().position(|&x| x == g) {
                    list.swap_remove(i);
                }
                held[r as usize].push(g);
                min = lowest(state);
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
}

/// The move donor `d` makes next, if any (see [`run`] for the preference order).
fn best_move(state: &State<'_>, d: u32, held: &[u32], receivers: &[u32]) -> Option<(u32, u32)> {
    let top = state.per_weight(d);
    // Key: leader rack of the receiver (wanted), leader rack of the donor (not wanted),
    // heavier, smaller id.
    type Key = (bool, bool, Level, std::cmp::Reverse<u32>);
    let mut best: Option<(Key, u32, u32)> = None;
    for &g in held {
        let topic = &state.view.topics()[state.view.topic_of(g)];
        let mut pick: Option<(bool, Level, u32)> = None;
        for &r in receivers {
            if topic.subscribers.binary_search(&r).is_err() {
                continue;
            }
            let after = state.per_weight_with(r, g);
            if after >= top {
                continue;
            }
            let cand = (state.in_leader_rack(r, g), Level(after), r);
            // Prefer the leader's rack, then the lowest after the move, then the index.
            let better = match pick {
                None => true,
                Some((rack, level, m)) => {
                    (cand.0, std::cmp::Reverse(cand.1), std::cmp::Reverse(cand.2))
                        > (rack, std::cmp::Reverse(level), std::cmp::Reverse(m))
                }
            };
            if better {
                pick = Some(cand);
            }
        }
        let Some((rack, _, r)) = pick else {
            continue;
        };
        let key: Key = (
            rack,
            !state.in_leader_rack(d, g),
            Level(state.loads.of[g as usize]),
            std::cmp::Reverse(g),
        );
        if best.as_ref().is_none_or(|(k, _, _)| key > *k) {
            best = Some((key, g, r));
        }
    }
    best.map(|(_, g, r)| (g, r))
}
