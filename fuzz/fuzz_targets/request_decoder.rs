//! Fuzzes the request decoder: any byte string as a frame body must give a decoded
//! request or a rejection — never a panic, an abort or an allocation beyond the input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = drover_kafka_wire::decode_request(bytes::Bytes::copy_from_slice(data));
});
