//! Fuzzes the aborted-transactions index decoder (`drover_log::txn_index::decode`,
//! the `.txnindex` files read when a partition opens) and the transaction marker
//! decoder (`drover_log::txn_marker::decode_result`) with arbitrary bytes: no
//! panic, never more entries than the cap, every entry's offsets in order, whole
//! entries encode back to the bytes they came from, and a marker built from the
//! fuzzer's fields decodes to its own result.
#![no_main]

use drover_log::{
    batch::check_batch,
    txn_index::{decode, ENTRY_LEN},
    txn_marker::decode_result,
    TxnMarker, TxnResult,
};
use libfuzzer_sys::fuzz_target;

const CAP: usize = 16;

fuzz_target!(|data: &[u8]| {
    if let Ok((entries, partial)) = decode(data, CAP) {
        assert!(entries.len() <= CAP);
        assert_eq!(partial, data.len() % ENTRY_LEN != 0);
        let encoded: Vec<u8> = entries.iter().flat_map(|e| e.encode()).collect();
        assert_eq!(&encoded[..], &data[..entries.len() * ENTRY_LEN]);
        assert!(entries
            .iter()
            .all(|e| 0 <= e.first_offset && e.first_offset <= e.last_offset));
    }
    // Arbitrary bytes as a control batch: the result decoder never panics.
    if let Ok(header) = check_batch(data, data.len()) {
        let _ = decode_result(&header, data);
    }
    if data.len() >= 15 {
        let marker = TxnMarker {
            producer_id: i64::from_be_bytes(data[..8].try_into().unwrap()),
            producer_epoch: i16::from_be_bytes([data[8], data[9]]),
            coordinator_epoch: i32::from_be_bytes(data[10..14].try_into().unwrap()),
            result: if data[14] & 1 == 0 { TxnResult::Abort } else { TxnResult::Commit },
            timestamp_ms: 0,
        };
        let bytes = marker.encode();
        let header = check_batch(&bytes, bytes.len()).unwrap();
        assert_eq!(decode_result(&header, &bytes), Some(marker.result));
    }
});
