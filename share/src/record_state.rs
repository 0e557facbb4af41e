//! Record states and acknowledge types, with the numbers they have on the wire and in
//! the share-state store (KIP-932, "In-flight records"; Kafka's `RecordState` and
//! `AcknowledgeType`).

/// The state of one in-flight record of a share-partition.
///
/// Transitions (KIP-932): Available → Acquired (a fetch, with a delivery-count
/// increment and a lock); Acquired → Acknowledged (Accept), Archived (Reject, Gap, or a
/// release at the delivery-count limit), Available (Release, lock expiry, the member's
/// session closing). Acknowledged and Archived are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordState {
    /// May be acquired by the next fetch.
    Available,
    /// Held by one member until it acknowledges or its lock expires.
    Acquired,
    /// Accepted by a consumer: never delivered again.
    Acknowledged,
    /// Rejected, a gap, aborted, or past the delivery-count limit: never delivered again.
    Archived,
}

impl RecordState {
    /// The state's number in the share-state store (Kafka's `RecordState.id`: 0, 1, 2, 4).
    pub const fn code(self) -> u8 {
        match self {
            RecordState::Available => 0,
            RecordState::Acquired => 1,
            RecordState::Acknowledged => 2,
            RecordState::Archived => 4,
        }
    }

    /// The state with number `code`, if it is one.
    pub const fn from_code(code: u8) -> Option<RecordState> {
        match code {
            0 => Some(RecordState::Available),
            1 => Some(RecordState::Acquired),
            2 => Some(RecordState::Acknowledged),
            4 => Some(RecordState::Archived),
            _ => None,
        }
    }

    /// Whether the record is done with: never delivered again.
    pub const fn is_final(self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }
}

/// How a consumer acknowledges a record (ShareFetch/ShareAcknowledge `AcknowledgeTypes`,
/// KIP-932).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AckType {
    /// 0: an offset with no record for the consumer (a transaction marker, a compacted
    /// hole); archived.
    Gap,
    /// 1: processed; acknowledged.
    Accept,
    /// 2: give it back; available again (archived at the delivery-count limit).
    Release,
    /// 3: unprocessable; archived.
    Reject,
}

impl AckType {
    /// The type with wire code `code`, if it is one.
    pub const fn from_code(code: i8) -> Option<AckType> {
        match code {
            0 => Some(AckType::Gap),
            1 => Some(AckType::Accept),
            2 => Some(AckType::Release),
            3 => Some(AckType::Reject),
            _ => None,
        }
    }

    /// The wire code.
    pub const fn code(self) -> i8 {
        match self {
            AckType::Gap => 0,
            AckType::Accept => 1,
            AckType::Release => 2,
            AckType::Reject => 3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for s in [
            RecordState::Available,
            RecordState::Acquired,
            RecordState::Acknowledged,
            RecordState::Archived,
        ] {
            assert_eq!(RecordState::from_code(s.code()), Some(s));
        }
        assert_eq!(RecordState::from_code(3), None);
        for t in [
            AckType::Gap,
            AckType::Accept,
            AckType::Release,
            AckType::Reject,
        ] {
            assert_eq!(AckType::from_code(t.code()), Some(t));
        }
        assert_eq!(AckType::from_code(4), None);
        assert_eq!(AckType::from_code(-1), None);
    }
}
