//! How the connector reaches a listener that is not PLAINTEXT (issue 29 item 5): TLS
//! with rustls (the broker's certificate checked against a CA file, its name against
//! the host the connector connects to) and SASL — SCRAM-SHA-512, SCRAM-SHA-256 (RFC
//! 5802/7677, as Kafka's KIP-84) or PLAIN — through Kafka's SaslHandshake v1 and
//! SaslAuthenticate, before any other request on every connection (bootstrap,
//! coordinator channel, fetchers). docs/security.md, "The native protocol on SASL
//! listeners".
//!
//! The password lives in the configuration only; it is never formatted (`Debug` shows
//! `***`) and never part of an error. A SCRAM exchange checks the broker's final
//! signature, so a broker that does not know the password is refused.

use std::{fmt, path::PathBuf, sync::Arc};

use base64::{engine::general_purpose::STANDARD, Engine};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

use crate::error::ClientError;

/// The SASL mechanisms the connector speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    /// SCRAM-SHA-512 (the broker's default).
    ScramSha512,
    /// SCRAM-SHA-256.
    ScramSha256,
    /// PLAIN (RFC 4616): the password crosses the connection; use it over TLS.
    Plain,
}

impl SaslMechanism {
    /// Parses a mechanism's SASL name (case-insensitive).
    pub fn from_name(name: &str) -> Option<SaslMechanism> {
        match name.to_ascii_uppercase().as_str() {
            "SCRAM-SHA-512" => Some(SaslMechanism::ScramSha512),
            "SCRAM-SHA-256" => Some(SaslMechanism::ScramSha256),
            "PLAIN" => Some(SaslMechanism::Plain),
            _ => None,
        }
    }

    /// The SASL name.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::Plain => "PLAIN",
        }
    }
}

/// SASL credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslCredentials {
    /// The mechanism.
    pub mechanism: SaslMechanism,
    /// The user name.
    pub username: String,
    /// The password (never formatted).
    pub password: String,
}

impl fmt::Debug for SaslCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaslCredentials")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &"***")
            .finish()
    }
}

/// TLS settings: the CA file the broker's certificate must chain to, and optionally the
/// client's own certificate (mTLS listeners, `client_auth`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// PEM file of the CA certificates to trust.
    pub ca_file: PathBuf,
    /// The client's certificate chain and private key (PEM files), for listeners that
    /// ask for one.
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

/// The connector's security settings (Kafka's `security.protocol` is which of the two
/// are set). Default: neither, PLAINTEXT.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Security {
    /// TLS (SSL, SASL_SSL).
    pub tls: Option<TlsSettings>,
    /// SASL (SASL_PLAINTEXT, SASL_SSL).
    pub sasl: Option<SaslCredentials>,
}

impl Security {
    /// The rustls client configuration of `tls`, built from its CA file.
    pub(crate) fn tls_config(tls: &TlsSettings) -> Result<Arc<rustls::ClientConfig>, ClientError> {
        use rustls::pki_types::{pem::PemObject, CertificateDer};
        let bad = |why: String| {
            ClientError::Config(format!("TLS CA file {}: {why}", tls.ca_file.display()))
        };
        let bytes = std::fs::read(&tls.ca_file).map_err(|e| bad(e.to_string()))?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&bytes) {
            let cert = cert.map_err(|e| bad(format!("not PEM certificates ({e})")))?;
            roots.add(cert).map_err(|e| bad(e.to_string()))?;
        }
        if roots.is_empty() {
            return Err(bad("no certificate in it".into()));
        }
        // The ring provider, as the broker's listeners (host/src/server/tls.rs).
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(e.to_string()))?
            .with_root_certificates(roots);
        let config = match &tls.client_cert {
            None => builder.with_no_client_auth(),
            Some((chain, key)) => {
                use rustls::pki_types::PrivateKeyDer;
                // Errors name the files, never the key's contents.
                let file = |path: &PathBuf, why: String| {
                    ClientError::Config(format!("TLS client file {}: {why}", path.display()))
                };
                let bytes = std::fs::read(chain).map_err(|e| file(chain, e.to_string()))?;
                let certs = CertificateDer::pem_slice_iter(&bytes)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| file(chain, "not PEM certificates".into()))?;
                let bytes = std::fs::read(key).map_err(|e| file(key, e.kind().to_string()))?;
                let key_der = PrivateKeyDer::from_pem_slice(&bytes)
                    .map_err(|_| file(key, "no PEM private key in it".into()))?;
                builder
                    .with_client_auth_cert(certs, key_der)
                    .map_err(|e| file(chain, e.to_string()))?
            }
        };
        Ok(Arc::new(config))
    }
}

/// One SASL exchange on the client's side: the tokens to send, in turn.
pub(crate) enum Exchange {
    /// PLAIN: one message.
    Plain,
    /// SCRAM, after the client-first message.
    Scram {
        sha512: bool,
        nonce: String,
        client_first_bare: String,
        /// The expected server signature, once the final message was built.
        server_signature: Option<Vec<u8>>,
    },
}

/// Why an exchange failed, without any secret in it.
fn failed(why: &str) -> ClientError {
    ClientError::Io(format!("SASL authentication: {why}"))
}

/// SCRAM's user name escaping (RFC 5802 §5.1).
fn saslname(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

impl Exchange {
    /// Starts an exchange: the first token to send.
    pub(crate) fn start(creds: &SaslCredentials) -> Result<(Exchange, Vec<u8>), ClientError> {
        match creds.mechanism {
            SaslMechanism::Plain => {
                let mut token = Vec::with_capacity(creds.username.len() + creds.password.len() + 2);
                token.push(0);
                token.extend_from_slice(creds.username.as_bytes());
                token.push(0);
                token.extend_from_slice(creds.password.as_bytes());
                Ok((Exchange::Plain, token))
            }
            SaslMechanism::ScramSha512 | SaslMechanism::ScramSha256 => {
                let mut raw = [0u8; 24];
                getrandom::getrandom(&mut raw).map_err(|_| failed("no randomness for a nonce"))?;
                let nonce = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw);
                let client_first_bare = format!("n={},r={nonce}", saslname(&creds.username));
                let token = format!("n,,{client_first_bare}").into_bytes();
                Ok((
                    Exchange::Scram {
                        sha512: creds.mechanism == SaslMechanism::ScramSha512,
                        nonce,
                        client_first_bare,
                        server_signature: None,
                    },
                    token,
                ))
            }
        }
    }

    /// The broker's answer to the last token: the next token to send, or `None` when
    /// the exchange is done (the broker proved it knows the credential).
    pub(crate) fn step(
        &mut self,
        creds: &SaslCredentials,
        answer: &[u8],
    ) -> Result<Option<Vec<u8>>, ClientError> {
        let Exchange::Scram {
            sha512,
            nonce,
            client_first_bare,
            server_signature,
        } = self
        else {
            return Ok(None);
        };
        let text = std::str::from_utf8(answer).map_err(|_| failed("broker message not UTF-8"))?;
        if let Some(expected) = server_signature.take() {
            let got = text
                .strip_prefix("v=")
                .and_then(|v| STANDARD.decode(v).ok())
                .ok_or_else(|| failed("no server signature in the broker's final message"))?;
            if !bool::from(subtle::ConstantTimeEq::ct_eq(&got[..], &expected[..])) {
                return Err(failed(
                    "the broker's signature is wrong: it does not know the credential",
                ));
            }
            return Ok(None);
        }
        let field = |key: &str| {
            text.split(',')
                .find_map(|f| f.strip_prefix(key))
                .ok_or_else(|| failed("malformed server-first message"))
        };
        let combined = field("r=")?;
        if !combined.starts_with(nonce.as_str()) || combined.len() == nonce.len() {
            return Err(failed("the broker's nonce does not extend the client's"));
        }
        let salt = STANDARD
            .decode(field("s=")?)
            .map_err(|_| failed("malformed salt"))?;
        let iterations: u32 = field("i=")?
            .parse()
            .map_err(|_| failed("malformed iteration count"))?;
        if !(4096..=16384).contains(&iterations) {
            return Err(failed("iteration count outside 4096-16384"));
        }
        let without_proof = format!("c=biws,r={combined}");
        let auth = format!("{client_first_bare},{text},{without_proof}");
        let (proof, signature) = keys(*sha512, creds.password.as_bytes(), &salt, iterations, &auth);
        *server_signature = Some(signature);
        Ok(Some(
            format!("{without_proof},p={}", STANDARD.encode(proof)).into_bytes(),
        ))
    }
}

/// RFC 5802 §3: (ClientProof, ServerSignature) for `auth` (the AuthMessage), with
/// SHA-512 or SHA-256.
fn keys(
    sha512: bool,
    password: &[u8],
    salt: &[u8],
    iterations: u32,
    auth: &str,
) -> (Vec<u8>, Vec<u8>) {
    macro_rules! derive {
        ($hash:ty) => {{
            type M = Hmac<$hash>;
            let mut salted = vec![0u8; <$hash as Digest>::output_size()];
            pbkdf2::pbkdf2::<M>(password, salt, iterations, &mut salted)
                .expect("HMAC takes keys of any length");
            let hmac = |key: &[u8], data: &[u8]| {
                let mut mac =
                    <M as Mac>::new_from_slice(key).expect("HMAC takes keys of any length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            };
            let client_key = hmac(&salted, b"Client Key");
            let stored_key = <$hash>::digest(&client_key);
            let client_signature = hmac(&stored_key, auth.as_bytes());
            let proof = client_key
                .iter()
                .zip(&client_signature)
                .map(|(a, b)| a ^ b)
                .collect();
            let server_key = hmac(&salted, b"Server Key");
            (proof, hmac(&server_key, auth.as_bytes()))
        }};
    }
    if sha512 {
        derive!(Sha512)
    } else {
        derive!(Sha256)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's SCRAM-SHA-256 example, with its client nonce.
    #[test]
    fn rfc7677_exchange() {
        let creds = SaslCredentials {
            mechanism: SaslMechanism::ScramSha256,
            username: "user".into(),
            password: "pencil".into(),
        };
        let mut exchange = Exchange::Scram {
            sha512: false,
            nonce: "rOprNGfwEbeRWgbNEkqO".into(),
            client_first_bare: "n=user,r=rOprNGfwEbeRWgbNEkqO".into(),
            server_signature: None,
        };
        let server_first =
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let last = exchange.step(&creds, server_first).unwrap().unwrap();
        assert_eq!(
            String::from_utf8(last).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        assert!(exchange
            .step(&creds, b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap()
            .is_none());
    }

    #[test]
    fn a_wrong_server_signature_or_nonce_is_refused_and_the_password_never_shows() {
        let creds = SaslCredentials {
            mechanism: SaslMechanism::ScramSha256,
            username: "user".into(),
            password: "pencil".into(),
        };
        let (mut exchange, first) = Exchange::start(&creds).unwrap();
        let first = String::from_utf8(first).unwrap();
        let nonce = first.rsplit_once("r=").unwrap().1.to_owned();
        let bad = exchange.step(&creds, b"r=other,s=AAAA,i=4096").unwrap_err();
        assert!(bad.to_string().contains("nonce"), "{bad}");
        let mut exchange = Exchange::Scram {
            sha512: false,
            nonce: nonce.clone(),
            client_first_bare: format!("n=user,r={nonce}"),
            server_signature: None,
        };
        let server_first = format!("r={nonce}xyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096");
        exchange
            .step(&creds, server_first.as_bytes())
            .unwrap()
            .unwrap();
        let bad = exchange.step(&creds, b"v=AAAA").unwrap_err();
        assert!(bad.to_string().contains("signature"), "{bad}");
        assert!(!format!("{creds:?}").contains("pencil"));
        assert!(!bad.to_string().contains("pencil"));
    }
}
