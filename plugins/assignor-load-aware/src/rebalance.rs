//! The rebalancing pass: moves partitions from members above the tolerance band to
//! members below it, until no move narrows the gap by more than the band.

use std::collections::BTreeSet;

use crate::{level::Level, state::State};

/// The least gain of a move, as a fraction of the moved partition's load per unit of
/// the receiver's weight: the donor's level must end at least this much above the
/// receiver's new one. Noise in measured rates (a fraction of a percent between
/// partitions of equal traffic) stays far below it, so `tolerance = 0` does not rotate
/// partitions between members under a steady load.
const MIN_GAIN: f64 = 0.1;

/// At most this many passes over the members; a pass that moves nothing ends it
/// sooner (and every move strictly lowers the sorted vector of loads per weight, so
/// the passes end by themselves long before in practice).
const MAX_PASSES: usize = 64;

/// Moves partitions while one can move: member `d` gives partition `g` to a subscriber
/// `r` of `g`'s topic when `d`'s load per unit of weight exceeds `r`'s by more than the
/// band *and* `r`'s after taking `g` ends below `d`'s before minus the band, so every
/// move narrows the gap by more than the band and no later move can undo it (a receiver
/// allowed to end anywhere below the donor's level could overshoot, and the next pass,
/// or the next rebalance, would move a partition back: a swap under steady load).
/// Donors go from the most
/// loaded down. Among the possible moves of a donor it takes one to a member in `g`'s
/// leader rack first, then one whose leader rack is not the donor's, then the heaviest
/// partition (ties: the smaller global id); the receiver is the least loaded eligible
/// subscriber (the least loaded in the leader's rack when there is one).
///
/// When it ends by itself (a pass without a move), no such move is left: no member is
/// above another subscriber of one of its partitions' topics by more than the band
/// unless that partition alone would put the other at or above the first's level minus
/// the band — balance by weight within one partition's load plus the band.
pub(crate) fn run(state: &mut State<'_>) {
    let members = state.view.members().len();
    let mut held: Vec<Vec<u32>> = vec![Vec::new(); members];
    for (g, &m) in state.owners.iter().enumerate() {
        held[m as usize].push(g as u32);
    }
    // Members that subscribe to something, by (load per weight, index).
    let mut by_level: BTreeSet<(Level, u32)> = (0..members as u32)
        .filter(|&m| !state.view.members()[m as usize].topics.is_empty())
        .map(|m| (Level(state.per_weight(m)), m))
        .collect();
    for _ in 0..MAX_PASSES {
        let order: Vec<u32> = by_level.iter().rev().map(|&(_, m)| m).collect();
        let mut moved = false;
        for d in order {
            loop {
                let top = state.per_weight(d);
                let Some(&(Level(min), _)) = by_level.first() else {
                    break;
                };
                if top - min <= state.band {
                    break;
                }
                let Some((g, r)) = best_move(state, d, &held[d as usize], &by_level) else {
                    break;
                };
                by_level.remove(&(Level(state.per_weight(d)), d));
                by_level.remove(&(Level(state.per_weight(r)), r));
                state.shift(g, r);
                by_level.insert((Level(state.per_weight(d)), d));
                by_level.insert((Level(state.per_weight(r)), r));
                let list = &mut held[d as usize];
                if let Some(i) = list.iter().position(|&x| x == g) {
                    list.swap_remove(i);
                }
                held[r as usize].push(g);
                moved = true;
            }
            // Donors below the band of the least loaded have nothing to give.
            if let Some(&(Level(min), _)) = by_level.first() {
                if state.per_weight(d) - min <= state.band && !moved {
                    break;
                }
            }
        }
        if !moved {
            break;
        }
    }
}

/// The move donor `d` makes next, if any (see [`run`] for the preference order).
/// `by_level` orders the candidate receivers.
fn best_move(
    state: &State<'_>,
    d: u32,
    held: &[u32],
    by_level: &BTreeSet<(Level, u32)>,
) -> Option<(u32, u32)> {
    let top = state.per_weight(d);
    let racks = state.racks.is_active();
    // Key: receiver in the leader's rack (wanted), donor in it (not wanted), heavier,
    // smaller id.
    type Key = (bool, bool, Level, std::cmp::Reverse<u32>);
    let mut best: Option<(Key, u32, u32)> = None;
    for &g in held {
        let topic = &state.view.topics()[state.view.topic_of(g)];
        let mut pick: Option<(bool, u32)> = None;
        // Receivers in ascending load: the eligible ones are those more than the band
        // below the donor.
        for &(Level(level), r) in by_level {
            if top - level <= state.band {
                break;
            }
            if r == d || topic.subscribers.binary_search(&r).is_err() {
                continue;
            }
            // The receiver must end at least the band below the donor's level: a move
            // that narrows the gap by less would overshoot and be undone. And the move
            // must lower the pair's top level by a real share of what moves
            // ([`MIN_GAIN`]): with a band near 0, partitions of nearly equal measured
            // load would otherwise trade places on measurement noise at every re-run.
            let after = state.per_weight_with(r, g);
            if after >= top - state.band || top - after < MIN_GAIN * state.load_per_weight(r, g) {
                continue;
            }
            let in_rack = state.in_leader_rack(r, g);
            if pick.is_none() || (in_rack && pick.is_some_and(|(rack, _)| !rack)) {
                pick = Some((in_rack, r));
            }
            // The least loaded eligible receiver is found; keep looking only for one
            // in the leader's rack.
            if !racks || in_rack {
                break;
            }
        }
        let Some((rack, r)) = pick else {
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
