//! The server side of one SCRAM exchange (RFC 5802 §3 and §5, RFC 7677; KIP-84):
//!
//! ```text
//! client: n,,n=user,r=<c-nonce>                         client-first
//! server: r=<c-nonce><s-nonce>,s=<salt>,i=<iterations>  server-first
//! client: c=biws,r=<c-nonce><s-nonce>,p=<proof>         client-final
//! server: v=<server signature>                          server-final
//! ```
//!
//! Unknown users get a decoy credential ([`super::decoy`]) and the exchange runs the
//! same until the proof comparison, which fails for them whatever the proof. Every
//! failure has the same outcome for the client (SASL_AUTHENTICATION_FAILED with one
//! message); the [`ScramFailure`] says which check failed, for the broker's own log.
//!
//! As Kafka's `ScramSaslServer`: an authzid, if given, must be the user name; the
//! `tokenauth` extension (delegation tokens) is refused, since this broker issues none.

use base64::{engine::general_purpose::STANDARD, Engine};
use drover_sasl_messages::scram::{ClientFinal, ClientFirst, MessageError};

use super::{
    decoy::{Lookup, Snapshot},
    keys,
    mechanism::ScramMechanism,
};

/// Which check of an exchange failed. Its `Display` holds no credential or input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScramFailure {
    /// A message out of the grammar or its bounds.
    #[error("{0}")]
    Malformed(MessageError),
    /// An authorization id other than the user name.
    #[error("authorization id differs from the user name")]
    Authzid,
    /// Delegation-token authentication (`tokenauth=true`) asked for.
    #[error("delegation tokens are not supported")]
    TokenAuth,
    /// The final message's channel binding is not the first message's gs2-header.
    #[error("channel binding differs from the gs2-header")]
    ChannelBinding,
    /// The final message's nonce is not the exchange's.
    #[error("nonce mismatch")]
    Nonce,
    /// The proof is not the user's (or the user does not exist).
    #[error("invalid credentials")]
    Proof,
}

/// An exchange between its first and final messages: what the final message is
/// checked against.
pub struct ScramExchange {
    mechanism: ScramMechanism,
    username: String,
    lookup: Lookup,
    gs2_header: String,
    nonce: String,
    client_first_bare: String,
    server_first: String,
}

impl std::fmt::Debug for ScramExchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramExchange")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl ScramExchange {
    /// Handles the client-first message: looks the user up in `snapshot` (a decoy for
    /// an unknown user) and answers the server-first message, with `server_nonce`
    /// (printable ASCII without `,`) appended to the client's nonce.
    pub fn start(
        mechanism: ScramMechanism,
        snapshot: &Snapshot,
        client_first: &[u8],
        server_nonce: &str,
    ) -> Result<(ScramExchange, Vec<u8>), ScramFailure> {
        let first = ClientFirst::parse(client_first).map_err(ScramFailure::Malformed)?;
        if first.authzid.as_ref().is_some_and(|a| *a != first.username) {
            return Err(ScramFailure::Authzid);
        }
        if first
            .extensions
            .iter()
            .any(|(k, v)| k == "tokenauth" && v.eq_ignore_ascii_case("true"))
        {
            return Err(ScramFailure::TokenAuth);
        }
        let lookup = snapshot.lookup(&first.username, mechanism);
        let nonce = format!("{}{server_nonce}", first.nonce);
        let server_first = format!(
            "r={nonce},s={},i={}",
            STANDARD.encode(&lookup.credential.salt),
            lookup.credential.iterations
        );
        let answer = server_first.clone().into_bytes();
        Ok((
            ScramExchange {
                mechanism,
                username: first.username,
                lookup,
                gs2_header: first.gs2_header,
                nonce,
                client_first_bare: first.bare,
                server_first,
            },
            answer,
        ))
    }

    /// The user name the exchange is for (as the client sent it).
    pub fn username(&self) -> &str {
        &self.username
    }

    /// The mechanism.
    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// The credential the final message is checked against (a decoy for an unknown
    /// user).
    pub fn credential(&self) -> &crate::auth::credentials::ScramCredential {
        &self.lookup.credential
    }

    /// Handles the client-final message: checks channel binding, nonce and proof and
    /// answers the server-final message (`v=<ServerSignature>`) with the authenticated
    /// user name.
    pub fn finish(self, client_final: &[u8]) -> Result<(String, Vec<u8>), ScramFailure> {
        let last = ClientFinal::parse(client_final).map_err(ScramFailure::Malformed)?;
        if last.channel_binding != self.gs2_header.as_bytes() {
            return Err(ScramFailure::ChannelBinding);
        }
        if last.nonce != self.nonce {
            return Err(ScramFailure::Nonce);
        }
        let auth_message = format!(
            "{},{},{}",
            self.client_first_bare, self.server_first, last.without_proof
        );
        let c = &self.lookup.credential;
        let valid = keys::verify_proof(
            self.mechanism,
            &c.stored_key,
            auth_message.as_bytes(),
            &last.proof,
        ) & self.lookup.known;
        if !bool::from(valid) {
            return Err(ScramFailure::Proof);
        }
        let signature =
            keys::server_signature(self.mechanism, &c.server_key, auth_message.as_bytes());
        Ok((
            self.username,
            format!("v={}", STANDARD.encode(signature)).into_bytes(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::credentials::{CredentialTable, ScramCredential};

    /// RFC 7677 §3's exchange, byte for byte, with its server nonce.
    #[test]
    fn rfc7677_exchange() {
        let m = ScramMechanism::Sha256;
        let salt = STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let salted = keys::salted_password(m, b"pencil", &salt, 4096);
        let mut table = CredentialTable::with_secret([0; 32]);
        table.insert(
            "user",
            m,
            ScramCredential::from_salted_password(m, &salt, &salted, 4096),
        );
        let snapshot = Snapshot::new(table);
        let (exchange, server_first) = ScramExchange::start(
            m,
            &snapshot,
            b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
            "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(server_first).unwrap(),
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        let (user, server_final) = exchange
            .finish(
                b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                  p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            )
            .unwrap();
        assert_eq!(user, "user");
        assert_eq!(
            String::from_utf8(server_final).unwrap(),
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
    }

    fn snapshot() -> Snapshot {
        let m = ScramMechanism::Sha512;
        let salted = keys::salted_password(m, b"secret", b"0123456789abcdef0123456789abcdef", 4096);
        let mut table = CredentialTable::with_secret([4; 32]);
        table.insert(
            "alice",
            m,
            ScramCredential::from_salted_password(
                m,
                b"0123456789abcdef0123456789abcdef",
                &salted,
                4096,
            ),
        );
        Snapshot::new(table)
    }

    /// The client side of RFC 5802 §3, for the tests.
    fn client_final(
        m: ScramMechanism,
        password: &[u8],
        client_first_bare: &str,
        server_first: &str,
        gs2: &str,
    ) -> String {
        let fields: Vec<&str> = server_first.split(',').collect();
        let nonce = &fields[0][2..];
        let salt = STANDARD.decode(&fields[1][2..]).unwrap();
        let iterations: u32 = fields[2][2..].parse().unwrap();
        let without_proof = format!("c={},r={nonce}", STANDARD.encode(gs2));
        let auth = format!("{client_first_bare},{server_first},{without_proof}");
        let salted = keys::salted_password(m, password, &salt, iterations);
        let proof = keys::client_proof(m, &salted, auth.as_bytes());
        format!("{without_proof},p={}", STANDARD.encode(proof))
    }

    #[test]
    fn sha512_exchange_and_its_failures() {
        let m = ScramMechanism::Sha512;
        let s = snapshot();
        let run = |user: &str, password: &[u8]| {
            let bare = format!("n={user},r=abc");
            let (exchange, first) =
                ScramExchange::start(m, &s, format!("n,,{bare}").as_bytes(), "XYZ").unwrap();
            let first = String::from_utf8(first).unwrap();
            exchange.finish(client_final(m, password, &bare, &first, "n,,").as_bytes())
        };
        assert_eq!(run("alice", b"secret").unwrap().0, "alice");
        assert_eq!(run("alice", b"wrong").unwrap_err(), ScramFailure::Proof);
        // An unknown user fails the same way, at the same step.
        assert_eq!(run("ghost", b"secret").unwrap_err(), ScramFailure::Proof);
        // Authzid, tokenauth, channel binding, nonce.
        assert_eq!(
            ScramExchange::start(m, &s, b"n,a=bob,n=alice,r=abc", "X").unwrap_err(),
            ScramFailure::Authzid
        );
        assert_eq!(
            ScramExchange::start(m, &s, b"n,,n=alice,r=abc,tokenauth=true", "X").unwrap_err(),
            ScramFailure::TokenAuth
        );
        let (exchange, first) = ScramExchange::start(m, &s, b"n,,n=alice,r=abc", "XYZ").unwrap();
        let first = String::from_utf8(first).unwrap();
        let other_cb = client_final(m, b"secret", "n=alice,r=abc", &first, "y,,");
        assert_eq!(
            exchange.finish(other_cb.as_bytes()).unwrap_err(),
            ScramFailure::ChannelBinding
        );
        let (exchange, _) = ScramExchange::start(m, &s, b"n,,n=alice,r=abc", "XYZ").unwrap();
        assert_eq!(
            exchange.finish(b"c=biws,r=abcXYZW,p=AAAA").unwrap_err(),
            ScramFailure::Nonce
        );
    }

    #[test]
    fn unknown_users_get_a_server_first_message_shaped_like_a_real_one() {
        let m = ScramMechanism::Sha512;
        let s = snapshot();
        let answer = |user: &str| {
            let (_, first) =
                ScramExchange::start(m, &s, format!("n,,n={user},r=abc").as_bytes(), "XYZ")
                    .unwrap();
            String::from_utf8(first).unwrap()
        };
        let (real, ghost) = (answer("alice"), answer("ghost"));
        assert_eq!(real.len(), ghost.len());
        assert!(ghost.ends_with(",i=4096"));
        assert_eq!(ghost, answer("ghost"), "the decoy is the same every time");
        assert_ne!(real, ghost);
    }
}
