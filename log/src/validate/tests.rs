//! The produce-path validation against batches a buggy or hostile client sends: each
//! class the hostile review of issue 13 found, refused with Kafka's error code.

use std::io::Write;

use bytes::Bytes;

use super::*;
use crate::{
    batch::check_batch,
    test_util::{put_varlong, RawBatch},
};

const NOW: i64 = 1_800_000_000_000;

fn rules() -> ValidationRules {
    ValidationRules::new(&LogConfig::default(), NOW)
}

fn validate(batch: Vec<u8>) -> Result<ValidatedBatch, BatchError> {
    validate_produced(Bytes::from(batch), &rules())
}

fn records(n: usize) -> Vec<(i64, Vec<u8>)> {
    (0..n).map(|i| (NOW + i as i64, vec![b'v'; 10])).collect()
}

/// One record's bytes: `fields` after the length prefix, which is `length` or the
/// true size.
fn record(length: Option<i64>, fields: &[i64], tail: &[u8]) -> Vec<u8> {
    let mut body = vec![0u8];
    for f in fields {
        put_varlong(&mut body, *f);
    }
    body.extend_from_slice(tail);
    let mut out = Vec::new();
    put_varlong(&mut out, length.unwrap_or(body.len() as i64));
    out.extend_from_slice(&body);
    out
}

/// A batch of one record whose payload is `payload`.
fn one_record_batch(payload: Vec<u8>) -> Vec<u8> {
    let mut raw = RawBatch::from_records(&records(1));
    raw.payload = payload;
    raw.encode()
}

fn compressed(codec: i16, payload: &[u8]) -> Vec<u8> {
    match codec {
        1 => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(payload).unwrap();
            e.finish().unwrap()
        }
        2 => snap::raw::Encoder::new().compress_vec(payload).unwrap(),
        3 => {
            let mut e = lz4::EncoderBuilder::new().build(Vec::new()).unwrap();
            e.write_all(payload).unwrap();
            e.finish().0
        }
        4 => zstd::encode_all(payload, 1).unwrap(),
        _ => payload.to_vec(),
    }
}

fn with_codec(mut raw: RawBatch, codec: i16) -> Vec<u8> {
    raw.payload = compressed(codec, &raw.payload);
    raw.attributes |= codec;
    raw.encode()
}

fn invalid_record(result: Result<ValidatedBatch, BatchError>) -> (usize, String) {
    match result {
        Err(BatchError::InvalidRecord { index, reason, .. }) => (index, reason),
        other => panic!("expected InvalidRecord, got {other:?}"),
    }
}

#[test]
fn an_honest_batch_passes_unchanged_in_every_codec() {
    for codec in 0..=4 {
        let bytes = with_codec(RawBatch::from_records(&records(50)), codec);
        let v = validate(bytes.clone()).unwrap();
        assert!(!v.rewritten(), "codec {codec}");
        assert_eq!(&v.bytes()[..], &bytes[..]);
        assert_eq!(v.header().max_timestamp, NOW + 49);
    }
}

#[test]
fn a_record_count_that_lies_is_refused() {
    // 4 records declaring 2, 2 declaring 5, 1 declaring 1,000,000.
    for (real, declared) in [(4, 2), (2, 5), (1, 1_000_000)] {
        let mut raw = RawBatch::from_records(&records(real));
        raw.records_count = declared;
        raw.last_offset_delta = declared - 1;
        let (_, reason) = invalid_record(validate(raw.encode()));
        assert!(
            reason.contains("remain") || reason.contains("end inside"),
            "{real} declaring {declared}: {reason}"
        );
        // Compressed, the same.
        let (_, reason) = invalid_record(validate(with_codec(raw, 4)));
        assert!(reason.contains("remain") || reason.contains("end inside"));
    }
}

#[test]
fn a_lying_max_timestamp_is_recomputed_and_the_crc_follows() {
    let ten_years = 10 * 365 * 24 * 3_600_000;
    for codec in [0, 1] {
        let mut raw = RawBatch::from_records(&records(3));
        raw.max_timestamp = NOW + ten_years;
        let v = validate(with_codec(raw, codec)).unwrap();
        assert!(v.rewritten());
        assert_eq!(v.header().max_timestamp, NOW + 2);
        let stored = check_batch(v.bytes(), usize::MAX).unwrap();
        assert_eq!(stored.max_timestamp, NOW + 2);
        assert_eq!(stored.crc, v.header().crc);
    }
}

#[test]
fn timestamps_outside_the_window_are_refused_with_the_record_index() {
    let hour = 3_600_000;
    let year_2100 = 4_102_444_800_000;
    for ts in [NOW + hour + 1, year_2100] {
        let mut recs = records(3);
        recs[2].0 = ts;
        let err = validate(RawBatch::from_records(&recs).encode()).unwrap_err();
        assert!(
            matches!(err, BatchError::InvalidTimestamp { index: 2, timestamp, .. } if timestamp == ts),
            "{err:?}"
        );
        assert_eq!(err.error_code(), 32);
        assert_eq!(err.record_index(), Some(2));
    }
    // An hour ahead is still fine, and so is any age by default; -1 means none.
    let mut recs = records(3);
    recs[1].0 = NOW + hour;
    recs[2].0 = 0;
    validate(RawBatch::from_records(&recs).encode()).unwrap();
    let strict = ValidationRules {
        timestamp_before_max_ms: 1000,
        ..rules()
    };
    let err = validate_produced(Bytes::from(RawBatch::from_records(&recs).encode()), &strict)
        .unwrap_err();
    assert!(matches!(err, BatchError::InvalidTimestamp { index: 2, .. }));
}

#[test]
fn malformed_record_fields_are_refused() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        // attributes, timestampDelta, offsetDelta, keyLength, ...
        ("negative key length", record(None, &[0, 0, -5, -1, 0], b"")),
        (
            "oversized key length",
            record(None, &[0, 0, 1000, -1, 0], b""),
        ),
        (
            "negative value length",
            record(None, &[0, 0, -1, -7, 0], b""),
        ),
        (
            "oversized value length",
            record(None, &[0, 0, -1, 50, 0], b"abc"),
        ),
        (
            "negative record length",
            record(Some(-3), &[0, 0, -1, -1, 0], b""),
        ),
        (
            "zero record length",
            record(Some(0), &[0, 0, -1, -1, 0], b""),
        ),
        (
            "record length too long",
            record(Some(1000), &[0, 0, -1, -1, 0], b""),
        ),
        (
            "record length too short",
            record(Some(3), &[0, 0, -1, -1, 0], b""),
        ),
        (
            "header count 100,000,000",
            record(None, &[0, 0, -1, -1, 100_000_000], b""),
        ),
        (
            "negative header count",
            record(None, &[0, 0, -1, -1, -1], b""),
        ),
        (
            "negative header key",
            record(None, &[0, 0, -1, -1, 1, -1, -1], b""),
        ),
        (
            "offset delta out of sequence",
            record(None, &[0, 3, -1, -1, 0], b""),
        ),
        ("fields past the data", record(None, &[0, 0, -1], b"")),
    ];
    for (what, payload) in cases {
        let err = validate(one_record_batch(payload.clone())).unwrap_err();
        assert_eq!(err.error_code(), 87, "{what}: {err}");
        assert!(
            matches!(err, BatchError::InvalidRecord { index: 0, .. }),
            "{what}: {err:?}"
        );
        let mut raw = RawBatch::from_records(&records(1));
        raw.payload = payload;
        let err = validate(with_codec(raw, 1)).unwrap_err();
        assert!(
            matches!(err, BatchError::InvalidRecord { .. }),
            "gzip {what}: {err:?}"
        );
    }
    // A record with headers and a key passes.
    let mut tail = Vec::new();
    tail.extend_from_slice(b"k");
    put_varlong(&mut tail, 1);
    tail.extend_from_slice(b"v");
    put_varlong(&mut tail, 1);
    put_varlong(&mut tail, 2);
    tail.extend_from_slice(b"hk");
    put_varlong(&mut tail, -1);
    let mut body = vec![0u8];
    for f in [0, 0, 1] {
        put_varlong(&mut body, f);
    }
    body.extend_from_slice(&tail);
    let mut payload = Vec::new();
    put_varlong(&mut payload, body.len() as i64);
    payload.extend_from_slice(&body);
    validate(one_record_batch(payload)).unwrap();
}

#[test]
fn broken_compressed_bodies_are_corrupt_messages() {
    let raw = RawBatch::from_records(&records(20));
    for codec in 1..=4 {
        // A compressed flag over a body that is no such stream.
        let mut garbage = raw.clone();
        garbage.attributes |= codec;
        let err = validate(garbage.encode()).unwrap_err();
        assert!(
            matches!(
                err,
                BatchError::CorruptCompression { .. } | BatchError::InvalidRecord { .. }
            ),
            "codec {codec}: {err:?}"
        );
        // A truncated stream.
        let mut cut = raw.clone();
        let full = compressed(codec, &cut.payload);
        cut.payload = full[..full.len() * 2 / 3].to_vec();
        cut.attributes |= codec;
        let err = validate(cut.encode()).unwrap_err();
        assert!(
            matches!(
                err,
                BatchError::CorruptCompression { .. } | BatchError::InvalidRecord { .. }
            ),
            "truncated codec {codec}: {err:?}"
        );
    }
}

#[test]
fn a_decompression_bomb_stops_at_the_cap() {
    let big = vec![(NOW, vec![0u8; 4 << 20])];
    let raw = RawBatch::from_records(&big);
    let small = ValidationRules {
        max_decompressed_bytes: 1 << 20,
        ..rules()
    };
    for codec in 1..=4 {
        let bytes = with_codec(raw.clone(), codec);
        let err = validate_produced(Bytes::from(bytes), &small).unwrap_err();
        assert!(
            matches!(
                err,
                BatchError::DecompressedTooLarge { .. } | BatchError::CorruptCompression { .. }
            ),
            "codec {codec}: {err:?}"
        );
        assert!(matches!(err.error_code(), 10 | 2));
    }
}

#[test]
fn batch_level_refusals() {
    let one = RawBatch::from_records(&records(2)).encode();
    let mut two = one.clone();
    two.extend_from_slice(&one);
    assert!(matches!(
        validate(two).unwrap_err(),
        BatchError::MultipleBatches { count: 2 }
    ));
    let mut txn = RawBatch::from_records(&records(2));
    txn.attributes |= 1 << 4;
    let err = validate(txn.encode()).unwrap_err();
    assert!(matches!(
        err,
        BatchError::TransactionalWithoutProducerId { .. }
    ));
    assert_eq!(err.error_code(), 87);
    let mut forged = RawBatch::from_records(&records(2));
    forged.attributes |= 1 << 4;
    forged.producer_id = 777;
    forged.producer_epoch = 0;
    forged.base_sequence = 0;
    // A transactional batch from a producer id is the producer state's to track
    // (whether its partition was added to the transaction is the coordinator's check).
    assert!(validate(forged.encode())
        .unwrap()
        .header()
        .is_transactional());
    let mut append_time = RawBatch::from_records(&records(2));
    append_time.attributes |= 1 << 3;
    let err = validate(append_time.encode()).unwrap_err();
    assert!(matches!(err, BatchError::LogAppendTime { .. }));
    assert_eq!(err.error_code(), 32);
}
