use bytes::BytesMut;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use proptest::prelude::*;

use super::*;
use crate::test_util::{batch, RawBatch};

const MAX: usize = 1 << 20;

fn records_strategy() -> impl Strategy<Value = Vec<(i64, Vec<u8>)>> {
    prop::collection::vec(
        (0i64..1 << 42, prop::collection::vec(any::<u8>(), 0..40)),
        1..12,
    )
}

#[test]
fn parses_a_hand_built_batch() {
    let raw = RawBatch::from_records(&[(1000, b"x".to_vec()), (990, b"yy".to_vec())]);
    let bytes = raw.encode();
    let h = check_batch(&bytes, MAX).unwrap();
    assert_eq!(h.size(), bytes.len());
    assert_eq!(h.records_count, 2);
    assert_eq!(h.last_offset_delta, 1);
    assert_eq!(h.base_timestamp, 1000);
    assert_eq!(h.max_timestamp, 1000);
    assert_eq!(h.magic, 2);
    assert_eq!(parse_batches(&bytes, MAX).unwrap(), vec![h]);
}

#[test]
fn rewriting_offset_and_epoch_keeps_the_batch_valid() {
    let mut bytes = batch(3, 10, 5);
    set_base_offset(&mut bytes, 4711);
    set_partition_leader_epoch(&mut bytes, 9);
    let h = check_batch(&bytes, MAX).unwrap();
    assert_eq!((h.base_offset, h.partition_leader_epoch), (4711, 9));
    assert_eq!((h.last_offset(), h.next_offset()), (4713, 4714));
}

#[test]
fn error_kinds_and_codes() {
    let good = batch(2, 5, 1);
    assert_eq!(parse_batches(&[], MAX), Err(BatchError::NoBatches));

    let mut legacy = good.clone();
    legacy[16] = 1;
    assert!(matches!(
        parse_batches(&legacy, MAX),
        Err(BatchError::UnsupportedMagic { magic: 1, .. })
    ));

    let mut short = good.clone();
    short[8..12].copy_from_slice(&48i32.to_be_bytes());
    assert!(matches!(
        parse_batches(&short, MAX),
        Err(BatchError::InvalidLength {
            batch_length: 48,
            ..
        })
    ));

    assert!(matches!(
        parse_batches(&good, good.len() - 1),
        Err(BatchError::TooLarge { .. })
    ));

    let two = [good.clone(), good[..good.len() - 1].to_vec()].concat();
    let err = parse_batches(&two, MAX).unwrap_err();
    assert_eq!(
        err,
        BatchError::Truncated {
            at: good.len(),
            needed: good.len(),
            available: good.len() - 1
        }
    );
    assert_eq!(err.error_code(), 2);

    let mut raw = RawBatch::from_records(&[(1, vec![1]), (2, vec![2])]);
    raw.last_offset_delta = 0;
    let err = parse_batches(&raw.encode(), MAX).unwrap_err();
    assert!(matches!(err, BatchError::InvalidCount { .. }), "{err}");
    assert_eq!(err.error_code(), 87);

    let mut control = RawBatch::from_records(&[(1, vec![1])]);
    control.attributes = 1 << 5;
    assert!(matches!(
        parse_batches(&control.encode(), MAX),
        Err(BatchError::ControlBatch { at: 0 })
    ));

    let mut codec = RawBatch::from_records(&[(1, vec![1])]);
    codec.attributes = 6;
    assert!(matches!(
        parse_batches(&codec.encode(), MAX),
        Err(BatchError::UnknownCompression { codec: 6, .. })
    ));

    let mut idempotent = RawBatch::from_records(&[(1, vec![1])]);
    idempotent.producer_id = 7;
    assert!(matches!(
        parse_batches(&idempotent.encode(), MAX),
        Err(BatchError::InvalidSequence { .. })
    ));
    idempotent.base_sequence = 0;
    parse_batches(&idempotent.encode(), MAX).unwrap();

    let mut bad_crc = good;
    bad_crc[40] ^= 1;
    let err = parse_batches(&bad_crc, MAX).unwrap_err();
    assert!(matches!(err, BatchError::CrcMismatch { .. }));
    assert_eq!(err.error_code(), 2);
}

#[test]
fn compressed_payload_passes_untouched() {
    // zstd bit set, payload opaque: the broker never looks inside.
    let mut raw = RawBatch::from_records(&[(1, vec![0; 3]), (2, vec![0; 3]), (3, vec![0; 3])]);
    raw.attributes = 4;
    raw.payload = vec![0x28, 0xb5, 0x2f, 0xfd, 1, 2, 3];
    let bytes = raw.encode();
    let h = parse_batches(&bytes, MAX).unwrap()[0];
    assert_eq!((h.compression(), h.records_count), (4, 3));
}

#[test]
fn agrees_with_kafka_protocol_encoder_and_decoder() {
    let records: Vec<Record> = (0..5)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i,
            // The encoder starts a new batch when offset − sequence changes.
            sequence: i as i32,
            timestamp: 1_700_000_000_000 + i * 10,
            key: Some(bytes::Bytes::from(format!("k{i}"))),
            value: Some(bytes::Bytes::from(vec![i as u8; 20])),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
    let mut blob = buf.to_vec();

    let h = parse_batches(&blob, MAX).unwrap()[0];
    assert_eq!((h.records_count, h.last_offset_delta), (5, 4));
    assert_eq!(h.max_timestamp, 1_700_000_000_040);
    assert_eq!(h.base_timestamp, 1_700_000_000_000);

    set_base_offset(&mut blob, 100);
    set_partition_leader_epoch(&mut blob, 0);
    let decoded = RecordBatchDecoder::decode(&mut bytes::Bytes::from(blob)).unwrap();
    let offsets: Vec<i64> = decoded.records.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, vec![100, 101, 102, 103, 104]);

    // And the hand-built test batches are real batches.
    let ours = RawBatch::from_records(&[(7, b"hello".to_vec()), (9, b"world".to_vec())]);
    let decoded = RecordBatchDecoder::decode(&mut bytes::Bytes::from(ours.encode())).unwrap();
    assert_eq!(decoded.records.len(), 2);
    assert_eq!(decoded.records[1].timestamp, 9);
    assert_eq!(decoded.records[1].value.as_deref(), Some(&b"world"[..]));
}

proptest! {
    #[test]
    fn round_trip(batches in prop::collection::vec(records_strategy(), 1..5)) {
        let raws: Vec<RawBatch> = batches.iter().map(|r| RawBatch::from_records(r)).collect();
        let blob: Vec<u8> = raws.iter().flat_map(|r| r.encode()).collect();
        let headers = parse_batches(&blob, MAX).unwrap();
        prop_assert_eq!(headers.len(), raws.len());
        let mut at = 0;
        for (h, raw) in headers.iter().zip(&raws) {
            prop_assert_eq!(h.records_count, raw.records_count);
            prop_assert_eq!(h.last_offset_delta, raw.last_offset_delta);
            prop_assert_eq!(h.max_timestamp, raw.max_timestamp);
            prop_assert_eq!(h.base_timestamp, raw.base_timestamp);
            prop_assert_eq!(h, &check_batch(&blob[at..], MAX).unwrap());
            at += h.size();
        }
        prop_assert_eq!(at, blob.len());
    }

    #[test]
    fn a_flipped_bit_after_byte_21_is_caught_by_the_crc(
        records in records_strategy(),
        pick in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let mut bytes = RawBatch::from_records(&records).encode();
        let at = CRC_START + pick.index(bytes.len() - CRC_START);
        bytes[at] ^= 1 << bit;
        let err = parse_batches(&bytes, MAX).unwrap_err();
        prop_assert!(matches!(err, BatchError::CrcMismatch { .. }), "{}", err);
    }

    #[test]
    fn a_flipped_bit_anywhere_never_passes_unnoticed_where_covered(
        records in records_strategy(),
        pick in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let mut bytes = RawBatch::from_records(&records).encode();
        let at = pick.index(bytes.len());
        bytes[at] ^= 1 << bit;
        let result = parse_batches(&bytes, MAX);
        // Only baseOffset (0..8) and partitionLeaderEpoch (12..16) are outside the checks.
        if at < 8 || (12..16).contains(&at) {
            prop_assert!(result.is_ok());
        } else {
            prop_assert!(result.is_err());
        }
    }

    #[test]
    fn truncation_is_caught(
        batches in prop::collection::vec(records_strategy(), 1..4),
        pick in any::<prop::sample::Index>(),
    ) {
        let encoded: Vec<Vec<u8>> =
            batches.iter().map(|r| RawBatch::from_records(r).encode()).collect();
        let blob = encoded.concat();
        let boundaries: Vec<usize> = encoded
            .iter()
            .scan(0, |end, b| { *end += b.len(); Some(*end) })
            .collect();
        let cut = pick.index(blob.len());
        let result = parse_batches(&blob[..cut], MAX);
        if cut == 0 {
            prop_assert_eq!(result, Err(BatchError::NoBatches));
        } else if let Some(whole) = boundaries.iter().position(|&end| end == cut) {
            prop_assert_eq!(result.unwrap().len(), whole + 1);
        } else {
            let err = result.unwrap_err();
            prop_assert!(matches!(err, BatchError::Truncated { .. }), "{}", err);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse_batches(&bytes, MAX);
        let _ = check_batch(&bytes, 100);
        let _ = BatchHeader::parse(&bytes);
    }
}
