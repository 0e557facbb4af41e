//! Fuzzes the SASL client message parsers the broker runs on untrusted bytes before it
//! checks anything (`drover-sasl-messages`): SCRAM's client-first and client-final
//! messages (RFC 5802 §7) and PLAIN's (RFC 4616). Any byte string must give a parsed
//! message or an error — never a panic or an allocation beyond a small multiple of the
//! input — and what parses keeps the parsers' bounds and is made of the input's bytes:
//! a client-first message is its gs2-header followed by its bare part, a client-final
//! message starts with its part without the proof, a PLAIN user name is one of the
//! input's fields.
#![no_main]

use drover_sasl_messages::{
    plain::PlainMessage,
    scram::{ClientFinal, ClientFirst, MAX_EXTENSIONS, MAX_MESSAGE_BYTES, MAX_NONCE_CHARS},
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(first) = ClientFirst::parse(data) {
        assert!(data.len() <= MAX_MESSAGE_BYTES);
        assert_eq!(
            format!("{}{}", first.gs2_header, first.bare).as_bytes(),
            data
        );
        assert!(!first.username.is_empty());
        assert!(first.nonce.chars().count() <= MAX_NONCE_CHARS);
        assert!(first.extensions.len() <= MAX_EXTENSIONS);
        assert!(first.authzid.as_ref().is_none_or(|a| !a.is_empty()));
    }
    if let Ok(last) = ClientFinal::parse(data) {
        assert!(data.len() <= MAX_MESSAGE_BYTES);
        assert!(data.starts_with(last.without_proof.as_bytes()));
        assert!(last.nonce.chars().count() <= MAX_NONCE_CHARS);
        assert!(last.extensions.len() <= MAX_EXTENSIONS);
        assert!(last.proof.len() <= data.len());
        assert!(last.channel_binding.len() <= data.len());
    }
    if let Ok(plain) = PlainMessage::parse(data) {
        assert!(data.len() <= MAX_MESSAGE_BYTES);
        assert!(!plain.username.is_empty() && !plain.password().is_empty());
        assert!(data
            .split(|b| *b == 0)
            .any(|field| field == plain.username.as_bytes()));
    }
});
