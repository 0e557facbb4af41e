//! SCRAM's client messages (RFC 5802 §7), parsed with a bound on every length. Any
//! input gives a value or an error, never a panic (proptest below; a fuzz target can
//! call [`ClientFirst::parse`] and [`ClientFinal::parse`] directly).
//!
//! ```text
//! client-first-message = gs2-header client-first-message-bare
//! gs2-header           = gs2-cbind-flag "," [ "a=" saslname ] ","
//! gs2-cbind-flag       = "p=" cb-name / "n" / "y"
//! client-first-message-bare = [ "m=" ... "," ] "n=" saslname "," "r=" c-nonce [ "," extensions ]
//! client-final-message = "c=" base64 "," "r=" nonce [ "," extensions ] "," "p=" base64
//! ```
//!
//! As Kafka's `ScramMessages`: the user name is the saslname with `=2C` and `=3D`
//! decoded and no SASLprep; extensions are `key=value` pairs, of which Kafka knows
//! `tokenauth` (delegation tokens, which this broker does not serve: the caller
//! refuses it).

use base64::{engine::general_purpose::STANDARD, Engine};

/// Longest SCRAM client message accepted, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 4096;
/// Longest nonce accepted (the client's, or the client's and the server's together),
/// in characters.
pub const MAX_NONCE_CHARS: usize = 512;
/// Most extensions accepted in one message.
pub const MAX_EXTENSIONS: usize = 16;

/// Why a client message is not acceptable. Never shown to the client (which gets one
/// message for every failure); its `Display` holds no input bytes, so it may be logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MessageError {
    /// Longer than [`MAX_MESSAGE_BYTES`].
    #[error("message longer than {MAX_MESSAGE_BYTES} bytes")]
    TooLong,
    /// Not UTF-8.
    #[error("message is not UTF-8")]
    NotUtf8,
    /// Not in the grammar; the part named.
    #[error("malformed {0}")]
    Malformed(&'static str),
    /// Channel binding (`p=`) requested; this broker offers no `-PLUS` mechanism.
    #[error("channel binding requested")]
    ChannelBinding,
    /// The reserved `m=` attribute (RFC 5802 §5.1: the server must fail).
    #[error("reserved m= attribute")]
    ReservedExtension,
}

/// A parsed client-first-message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    /// The gs2-header as sent (`n,,`, `y,,`, `n,a=NAME,`): the final message's `c=`
    /// must be its base64.
    pub gs2_header: String,
    /// The authorization id (`a=`), decoded; Kafka accepts only none or the user name.
    pub authzid: Option<String>,
    /// The user name (`n=`), decoded.
    pub username: String,
    /// The client's nonce (`r=`).
    pub nonce: String,
    /// Extensions after the nonce, `(key, value)`.
    pub extensions: Vec<(String, String)>,
    /// client-first-message-bare as sent (part of the AuthMessage).
    pub bare: String,
}

/// A parsed client-final-message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFinal {
    /// `c=`: the channel binding data, decoded.
    pub channel_binding: Vec<u8>,
    /// `r=`: the whole nonce (client's and server's).
    pub nonce: String,
    /// Extensions between the nonce and the proof.
    pub extensions: Vec<(String, String)>,
    /// `p=`: the proof, decoded.
    pub proof: Vec<u8>,
    /// client-final-message-without-proof as sent (part of the AuthMessage).
    pub without_proof: String,
}

fn text(bytes: &[u8]) -> Result<&str, MessageError> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(MessageError::TooLong);
    }
    std::str::from_utf8(bytes).map_err(|_| MessageError::NotUtf8)
}

/// Decodes a saslname: `=2C` is `,`, `=3D` is `=`, any other `=` is an error; NUL is
/// refused (RFC 5802 §7 `value-safe-char`), as is an empty name.
pub fn decode_saslname(name: &str) -> Result<String, MessageError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(MessageError::Malformed("saslname escape")),
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    if out.is_empty() || out.contains('\0') {
        return Err(MessageError::Malformed("saslname"));
    }
    Ok(out)
}

/// Encodes a saslname (`,` as `=2C`, `=` as `=3D`).
pub fn encode_saslname(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

/// Whether `nonce` is a valid nonce: 1 to [`MAX_NONCE_CHARS`] printable ASCII
/// characters other than `,` (RFC 5802 §7 `printable`).
fn valid_nonce(nonce: &str) -> bool {
    !nonce.is_empty()
        && nonce.len() <= MAX_NONCE_CHARS
        && nonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

fn attribute<'a>(part: &'a str, name: &'static str) -> Result<&'a str, MessageError> {
    part.strip_prefix(name)
        .and_then(|p| p.strip_prefix('='))
        .ok_or(MessageError::Malformed(name))
}

fn extensions(parts: &[&str]) -> Result<Vec<(String, String)>, MessageError> {
    if parts.len() > MAX_EXTENSIONS {
        return Err(MessageError::Malformed("extensions"));
    }
    parts
        .iter()
        .map(|p| {
            let (key, value) = p
                .split_once('=')
                .ok_or(MessageError::Malformed("extension"))?;
            if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return Err(MessageError::Malformed("extension"));
            }
            Ok((key.to_owned(), value.to_owned()))
        })
        .collect()
}

impl ClientFirst {
    /// Parses a client-first-message.
    pub fn parse(bytes: &[u8]) -> Result<ClientFirst, MessageError> {
        let message = text(bytes)?;
        let mut parts = message.splitn(3, ',');
        let flag = parts.next().unwrap_or_default();
        let authz = parts.next().ok_or(MessageError::Malformed("gs2-header"))?;
        let bare = parts.next().ok_or(MessageError::Malformed("gs2-header"))?;
        match flag {
            "n" | "y" => {}
            f if f.starts_with("p=") => return Err(MessageError::ChannelBinding),
            _ => return Err(MessageError::Malformed("gs2-cbind-flag")),
        }
        let authzid = match authz {
            "" => None,
            a => Some(decode_saslname(attribute(a, "a")?)?),
        };
        let gs2_header = format!("{flag},{authz},");
        let fields: Vec<&str> = bare.split(',').collect();
        if fields.first().is_some_and(|f| f.starts_with("m=")) {
            return Err(MessageError::ReservedExtension);
        }
        if fields.len() < 2 {
            return Err(MessageError::Malformed("client-first-message-bare"));
        }
        let username = decode_saslname(attribute(fields[0], "n")?)?;
        let nonce = attribute(fields[1], "r")?;
        if !valid_nonce(nonce) {
            return Err(MessageError::Malformed("nonce"));
        }
        Ok(ClientFirst {
            gs2_header,
            authzid,
            username,
            nonce: nonce.to_owned(),
            extensions: extensions(&fields[2..])?,
            bare: bare.to_owned(),
        })
    }
}

impl ClientFinal {
    /// Parses a client-final-message.
    pub fn parse(bytes: &[u8]) -> Result<ClientFinal, MessageError> {
        let message = text(bytes)?;
        let (without_proof, proof) = message
            .rsplit_once(',')
            .ok_or(MessageError::Malformed("client-final-message"))?;
        let proof = STANDARD
            .decode(attribute(proof, "p")?)
            .map_err(|_| MessageError::Malformed("proof"))?;
        let fields: Vec<&str> = without_proof.split(',').collect();
        if fields.len() < 2 {
            return Err(MessageError::Malformed("client-final-message"));
        }
        let channel_binding = STANDARD
            .decode(attribute(fields[0], "c")?)
            .map_err(|_| MessageError::Malformed("channel-binding"))?;
        let nonce = attribute(fields[1], "r")?;
        if !valid_nonce(nonce) {
            return Err(MessageError::Malformed("nonce"));
        }
        Ok(ClientFinal {
            channel_binding,
            nonce: nonce.to_owned(),
            extensions: extensions(&fields[2..])?,
            proof,
            without_proof: without_proof.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn parses_rfc7677s_messages() {
        let first = ClientFirst::parse(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO").unwrap();
        assert_eq!(first.gs2_header, "n,,");
        assert_eq!(first.username, "user");
        assert_eq!(first.nonce, "rOprNGfwEbeRWgbNEkqO");
        assert_eq!(first.bare, "n=user,r=rOprNGfwEbeRWgbNEkqO");
        assert!(first.authzid.is_none() && first.extensions.is_empty());
        let last = ClientFinal::parse(
            b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
              p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        )
        .unwrap();
        assert_eq!(last.channel_binding, b"n,,");
        assert_eq!(
            last.nonce,
            "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
        );
        assert_eq!(last.proof.len(), 32);
        assert_eq!(
            last.without_proof,
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
        );
    }

    #[test]
    fn names_authzids_and_extensions() {
        let first = ClientFirst::parse(b"n,a=a=2Cb,n=a=2Cb=3Dc,r=xyz,tokenauth=true").unwrap();
        assert_eq!(first.username, "a,b=c");
        assert_eq!(first.authzid.as_deref(), Some("a,b"));
        assert_eq!(first.gs2_header, "n,a=a=2Cb,");
        assert_eq!(first.extensions, vec![("tokenauth".into(), "true".into())]);
        assert_eq!(encode_saslname("a,b=c"), "a=2Cb=3Dc");
        for bad in [
            &b"p=tls-unique,,n=u,r=x"[..],
            b"m=ext,n=u,r=x",
            b"n,,m=ext,n=u,r=x",
            b"x,,n=u,r=x",
            b"n,,n=,r=x",
            b"n,,n=a=2,r=x",
            b"n,,n=u,r=",
            b"n,,n=u,r=a b",
            b"n,,n=u",
            b"n,,r=x,n=u",
            b"n,,n=u\0,r=x",
            b"n,,n=u,r=x,=v",
            b"\xff,,n=u,r=x",
        ] {
            assert!(
                ClientFirst::parse(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(
            ClientFirst::parse(&vec![b'a'; MAX_MESSAGE_BYTES + 1]),
            Err(MessageError::TooLong)
        );
        for bad in [
            &b"c=biws,r=x"[..],
            b"c=biws,r=x,p=!!",
            b"c=!!,r=x,p=AAAA",
            b"r=x,c=biws,p=AAAA",
            b"c=biws,p=AAAA",
        ] {
            assert!(
                ClientFinal::parse(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn any_bytes_parse_or_fail_without_panicking(data in prop::collection::vec(any::<u8>(), 0..600)) {
            let _ = ClientFirst::parse(&data);
            let _ = ClientFinal::parse(&data);
        }

        #[test]
        fn mutated_messages_never_panic(
            flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
            cut in any::<prop::sample::Index>(),
        ) {
            for good in [
                &b"n,a=bob,n=bob,r=fyko+d2lbbFgONRv9qkxdawL,ext=1"[..],
                b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
            ] {
                let mut bytes = good.to_vec();
                for (at, value) in &flips {
                    let i = at.index(bytes.len());
                    bytes[i] = *value;
                }
                bytes.truncate(cut.index(bytes.len() + 1));
                let _ = ClientFirst::parse(&bytes);
                let _ = ClientFinal::parse(&bytes);
            }
        }

        #[test]
        fn saslnames_round_trip(name in "[^\u{0}]{1,40}") {
            prop_assert_eq!(decode_saslname(&encode_saslname(&name)).unwrap(), name);
        }
    }
}
