//! Connections: response ordering and which connections are coordinator channels.
//!
//! On a connection, responses go out in the order of the requests (docs/protocol.md
//! §1). Some answers wait for the offset store (CommitOffset, FetchOffsets), so each
//! request reserves a slot and a response leaves once every earlier slot is filled.

use std::collections::VecDeque;

use bytes::Bytes;

use crate::types::{ConnId, ConsumerId, GroupId};

/// A reserved place in a connection's response order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotRef {
    pub conn: ConnId,
    pub id: u64,
}

/// A frame ready to leave, in response order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReadyAnswer {
    /// The response frame.
    pub frame: Bytes,
    /// Whether this answer makes the connection a channel: the host is told so just
    /// before the answer (`Output::ChannelOpened`).
    pub opens_channel: bool,
}

/// Which member a channel belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChannelOf {
    pub group: GroupId,
    pub consumer: ConsumerId,
    pub incarnation: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Conn {
    /// Response slots in request order: (slot id, the answer once ready).
    slots: VecDeque<(u64, Option<ReadyAnswer>)>,
    next_slot: u64,
    /// Set once RegisterConsumer succeeded on this connection.
    pub channel: Option<ChannelOf>,
    /// The client's IP address, if the host told it.
    pub peer: Option<String>,
}

impl Conn {
    pub(crate) fn reserve(&mut self, conn: ConnId) -> SlotRef {
        let id = self.next_slot;
        self.next_slot += 1;
        self.slots.push_back((id, None));
        SlotRef { conn, id }
    }

    /// Fills slot `id`; returns the answers now ready to send, in order.
    pub(crate) fn fill(&mut self, id: u64, answer: ReadyAnswer) -> Vec<ReadyAnswer> {
        if let Some(front) = self.slots.front() {
            let index = id.wrapping_sub(front.0) as usize;
            if let Some(slot) = self.slots.get_mut(index) {
                debug_assert_eq!(slot.0, id);
                slot.1 = Some(answer);
            }
        }
        let mut ready = Vec::new();
        while matches!(self.slots.front(), Some((_, Some(_)))) {
            if let Some((_, Some(answer))) = self.slots.pop_front() {
                ready.push(answer);
            }
        }
        ready
    }

    /// Whether every response has been sent (so the coordinator may send a request on
    /// a channel).
    pub(crate) fn idle(&self) -> bool {
        self.slots.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_leave_in_request_order() {
        let mut c = Conn::default();
        let a = c.reserve(ConnId(1));
        let b = c.reserve(ConnId(1));
        let d = c.reserve(ConnId(1));
        let answer = |frame: &'static [u8], opens_channel| ReadyAnswer {
            frame: Bytes::from_static(frame),
            opens_channel,
        };
        let frames = |ready: Vec<ReadyAnswer>| -> Vec<Bytes> {
            ready.into_iter().map(|r| r.frame).collect()
        };
        assert!(c.fill(b.id, answer(b"b", true)).is_empty());
        let ready = c.fill(a.id, answer(b"a", false));
        assert_eq!(
            ready.iter().map(|r| r.opens_channel).collect::<Vec<_>>(),
            [false, true],
            "the channel opens with its own answer, not before"
        );
        assert_eq!(frames(ready), ["a", "b"]);
        assert!(!c.idle());
        assert_eq!(frames(c.fill(d.id, answer(b"d", false))), ["d"]);
        assert!(c.idle());
    }
}
