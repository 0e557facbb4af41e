//! Fuzzes the produce-path record validator (`drover_log::validate`): a batch
//! header with a correct CRC around fuzzer-chosen records, uncompressed, or compressed
//! by the harness so the record walker sees fuzzer-chosen decompressed bytes, or given
//! as a fuzzer-chosen compressed stream. Whatever the input: no panic, memory within
//! the rss limit, and a batch that passes re-validates to the same header (a corrected
//! maxTimestamp is stable).
#![no_main]

use std::io::Write;

use bytes::Bytes;
use drover_log::{
    batch::{check_batch, compute_crc},
    validate::{validate_produced, ValidationRules},
    LogConfig,
};
use libfuzzer_sys::fuzz_target;

const NOW: i64 = 1_800_000_000_000;

fn compress(codec: u8, data: &[u8]) -> Vec<u8> {
    match codec {
        1 => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        2 => snap::raw::Encoder::new().compress_vec(data).unwrap(),
        3 => {
            let mut e = lz4::EncoderBuilder::new().build(Vec::new()).unwrap();
            e.write_all(data).unwrap();
            e.finish().0
        }
        4 => zstd::encode_all(data, 1).unwrap(),
        _ => data.to_vec(),
    }
}

fuzz_target!(|data: &[u8]| {
    let [codec, count, mode, rest @ ..] = data else {
        return;
    };
    let codec = codec % 5;
    let count = i32::from(*count);
    let payload = if mode & 1 == 1 { compress(codec, rest) } else { rest.to_vec() };
    let attributes = i16::from(codec) | (i16::from(mode & 0b1_1000));
    let mut b = Vec::with_capacity(61 + payload.len());
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&((49 + payload.len()) as i32).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.push(2);
    b.extend_from_slice(&[0; 4]);
    b.extend_from_slice(&attributes.to_be_bytes());
    b.extend_from_slice(&(count - 1).to_be_bytes());
    b.extend_from_slice(&NOW.to_be_bytes());
    b.extend_from_slice(&(NOW + i64::from(*mode)).to_be_bytes());
    b.extend_from_slice(&(-1i64).to_be_bytes());
    b.extend_from_slice(&(-1i16).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.extend_from_slice(&count.to_be_bytes());
    b.extend_from_slice(&payload);
    let crc = compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    let config = LogConfig {
        max_decompressed_batch_bytes: 4 << 20,
        ..LogConfig::default()
    };
    let rules = ValidationRules::new(&config, NOW);
    if let Ok(v) = validate_produced(Bytes::from(b), &rules) {
        let stored = check_batch(v.bytes(), usize::MAX).expect("a validated batch is whole");
        assert_eq!(&stored, v.header());
        let again = validate_produced(v.bytes().clone(), &rules).expect("still valid");
        assert!(!again.rewritten());
        assert_eq!(again.header(), v.header());
    }
});
