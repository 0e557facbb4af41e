//! Fuzzes the producer state snapshot decoder
//! (`drover_log::producer_state::snapshot::decode`) with fuzzer-chosen bytes
//! behind a valid magic, version and CRC, so the count and length checks are reached:
//! no panic, no more producers than the cap, at most five batches each, and what
//! decodes encodes back to the same bytes.
#![no_main]

use drover_log::{
    batch::{compute_crc, CRC_START},
    producer_state::snapshot::{decode, encode},
};
use libfuzzer_sys::fuzz_target;

const CAP: usize = 64;

fuzz_target!(|data: &[u8]| {
    let mut bytes = b"DRPS\x00\x01\x00\x00\x00\x00".to_vec();
    bytes.extend_from_slice(data);
    // CRC-32C of bytes 10.. (compute_crc covers a batch from byte CRC_START on).
    let mut shifted = vec![0; CRC_START - 10];
    shifted.extend_from_slice(&bytes);
    let crc = compute_crc(&shifted[..]);
    bytes[6..10].copy_from_slice(&crc.to_be_bytes());
    if let Ok(snapshot) = decode(&bytes, CAP) {
        assert!(snapshot.producers.len() <= CAP);
        assert!(snapshot.producers.values().all(|p| (1..=5).contains(&p.batches.len())));
        // Producers are a map: a duplicate id in the input decodes to one entry, so only
        // inputs without duplicates round-trip byte for byte.
        let again = decode(&encode(snapshot.offset, snapshot.producers.iter()), CAP).unwrap();
        assert_eq!(again, snapshot);
    }
});
