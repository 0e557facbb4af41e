//! Fuzzes the native coordinator protocol decoders (`drover-protocol`): any byte string
//! as the body of every native request and response, and as a whole request frame,
//! must give a decoded message or a rejection — never a panic, an abort or an
//! allocation beyond a small multiple of the input. Whatever decodes must re-encode, in
//! the version it was decoded in, to bytes that decode to the same message.
#![no_main]

use bytes::{Bytes, BytesMut};
use drover_protocol::{decode_request, decode_request_frame, decode_response, ApiKey};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let data = Bytes::copy_from_slice(data);
    for key in ApiKey::ALL {
        for version in key.versions().min..=key.versions().max {
            if let Ok(request) = decode_request(key.code(), version, data.clone()) {
                let mut buf = BytesMut::new();
                request
                    .encode_version(&mut buf, version)
                    .expect("a decoded request re-encodes in its version");
                let again = decode_request(key.code(), version, buf.freeze());
                assert_eq!(again.as_ref(), Ok(&request));
            }
            if let Ok(response) = decode_response(key, version, data.clone()) {
                let mut buf = BytesMut::new();
                response.encode(&mut buf).expect("a decoded response re-encodes");
                let again = decode_response(key, version, buf.freeze());
                assert_eq!(again.as_ref(), Ok(&response));
            }
        }
    }
    let _ = decode_request_frame(data);
});
