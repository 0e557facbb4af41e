//! TLS on the SSL listeners (issue 29 item 2), with rustls and its `ring` provider.
//!
//! - **Certificates** come from PEM files (`[server.ssl]` or
//!   `[server.listener_ssl.<NAME>]`: `certificate_chain`, `private_key`, and for mTLS
//!   `client_ca`); TLS 1.2 and 1.3 only (`enabled_protocols`, Kafka's
//!   `ssl.enabled.protocols`).
//! - **Reload without a restart**: [`TlsListeners::reload`] (SIGHUP, `POST
//!   /v1/tls/reload`) reads every listener's files again and builds a new rustls
//!   configuration; new connections get it, connections already open keep theirs. A
//!   listener whose files fail to load keeps serving its previous certificate, and the
//!   failure is reported (log, metric, the admin call's answer). The rest of the TLS
//!   settings (client authentication, rules, protocols) are read from `drover.toml` at
//!   startup only.
//! - **Client certificates** (Kafka's `ssl.client.auth`): verified against
//!   `client_ca`; the principal is the certificate's subject through the mapping rules
//!   (server/principal.rs). A subject no rule maps closes the connection, as Kafka
//!   refuses it.
//! - **The handshake** ([`handshake`]) must finish within the connection's
//!   first-request deadline (`server.first_request_timeout_ms`, counted from the
//!   accept), under the connection bounds every connection has (server/admission.rs).
//!   A connection whose first byte cannot start a TLS handshake (plaintext Kafka bytes
//!   on a TLS port) is closed at once. Failures are counted by reason
//!   (`drover_tls_handshake_failures_total`) and logged, rate-limited, with the peer's
//!   address and rustls's description, never key material.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, RwLock},
};

use rustls::{
    pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer},
    server::WebPkiClientVerifier,
    RootCertStore, ServerConfig,
};
use serde::Serialize;
use tokio::{net::TcpStream, time::Instant};
use tokio_rustls::{server::TlsStream, TlsAcceptor};

use super::principal::{subject_rfc2253, Principal, PrincipalMapper};
use crate::config::{
    listeners::{ListenerName, ListenerSpec},
    ClientAuth, SslSection,
};

/// The first byte of every TLS connection: a handshake record (RFC 8446 §5.1,
/// `ContentType.handshake`).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// A listener's TLS material that cannot be loaded. Names the listener and the file,
/// never its contents.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read.
    #[error("listener {listener}: cannot read {what} {path}: {source}")]
    Read {
        /// The listener.
        listener: ListenerName,
        /// Which file (`certificate_chain`, `private_key`, `client_ca`).
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file is not what it should be.
    #[error("listener {listener}: {what} {path}: {why}")]
    Content {
        /// The listener.
        listener: ListenerName,
        /// Which file.
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// What is wrong, in general terms.
        why: String,
    },
    /// rustls refused the material (a key that does not match the certificate, an
    /// unsupported key type, a CA certificate it cannot use).
    #[error("listener {listener}: {why}")]
    Refused {
        /// The listener.
        listener: ListenerName,
        /// rustls's description.
        why: String,
    },
}

/// What a listener serves now, as the admin API and the reload report show it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct CertificateInfo {
    /// The listener.
    pub listener: String,
    /// The end-entity certificate's subject, RFC 2253.
    pub subject: String,
    /// When it expires, seconds since the Unix epoch.
    pub not_after_unix_s: i64,
    /// Certificates in the chain (end entity first).
    pub chain_length: usize,
}

/// What one TLS listener serves: its rustls configuration and how it names clients.
struct Loaded {
    acceptor: TlsAcceptor,
    info: CertificateInfo,
}

/// One TLS listener's material, replaced as a whole by a reload.
pub struct TlsListener {
    name: ListenerName,
    settings: SslSection,
    mapper: Arc<PrincipalMapper>,
    current: RwLock<Arc<Loaded>>,
}

impl std::fmt::Debug for TlsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsListener")
            .field("name", &self.name)
            .field("info", &self.info())
            .finish_non_exhaustive()
    }
}

impl TlsListener {
    /// Loads listener `name`'s files as `settings` names them.
    pub fn load(name: ListenerName, settings: SslSection) -> Result<TlsListener, TlsError> {
        let mapper = PrincipalMapper::parse(&settings.principal_mapping_rules).map_err(|e| {
            TlsError::Refused {
                listener: name.clone(),
                why: format!("principal_mapping_rules: {e}"),
            }
        })?;
        let loaded = build(&name, &settings)?;
        Ok(TlsListener {
            name,
            settings,
            mapper: Arc::new(mapper),
            current: RwLock::new(Arc::new(loaded)),
        })
    }

    /// The listener's name.
    pub fn name(&self) -> &ListenerName {
        &self.name
    }

    /// What it serves now.
    pub fn info(&self) -> CertificateInfo {
        self.current().info.clone()
    }

    fn current(&self) -> Arc<Loaded> {
        Arc::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Reads the files again; on success, new connections get the new material.
    pub fn reload(&self) -> Result<CertificateInfo, TlsError> {
        let loaded = build(&self.name, &self.settings)?;
        let info = loaded.info.clone();
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(loaded);
        Ok(info)
    }
}

/// Every TLS listener of the broker, for reloads.
#[derive(Debug, Default, Clone)]
pub struct TlsListeners {
    listeners: Vec<Arc<TlsListener>>,
}

/// One listener's reload result.
#[derive(Debug, Clone, Serialize)]
pub struct ReloadOutcome {
    /// The listener.
    pub listener: String,
    /// Whether the new files are served now.
    pub reloaded: bool,
    /// What it serves after the reload (the old material when it failed).
    pub certificate: CertificateInfo,
    /// Why it failed, if it did (no file contents).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl TlsListeners {
    /// Loads the TLS material of every TLS listener in `specs`.
    pub fn load(specs: &[ListenerSpec]) -> Result<TlsListeners, TlsError> {
        let listeners = specs
            .iter()
            .filter_map(|s| s.ssl.as_ref().map(|ssl| (s, ssl)))
            .map(|(s, ssl)| TlsListener::load(s.name.clone(), ssl.clone()).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TlsListeners { listeners })
    }

    /// These listeners and `listener` (the admin API's), which then reloads with them.
    pub fn with(mut self, listener: Arc<TlsListener>) -> TlsListeners {
        self.listeners.push(listener);
        self
    }

    /// The listener named `name`, if it has TLS.
    pub fn get(&self, name: &ListenerName) -> Option<Arc<TlsListener>> {
        self.listeners.iter().find(|l| l.name() == name).cloned()
    }

    /// Whether no listener has TLS.
    pub fn is_empty(&self) -> bool {
        self.listeners.is_empty()
    }

    /// What every TLS listener serves now.
    pub fn infos(&self) -> Vec<CertificateInfo> {
        self.listeners.iter().map(|l| l.info()).collect()
    }

    /// Reloads every TLS listener's files (each on its own: one that fails keeps its
    /// previous material), counting and logging each outcome. Blocking file I/O: call
    /// it from a blocking thread.
    pub fn reload(&self, metrics: &crate::metrics::Metrics) -> Vec<ReloadOutcome> {
        self.listeners
            .iter()
            .map(|l| match l.reload() {
                Ok(info) => {
                    metrics.tls_reload(true);
                    metrics.tls_certificate(&info.listener, info.not_after_unix_s);
                    tracing::info!(
                        listener = %l.name(),
                        subject = %info.subject,
                        not_after_unix_s = info.not_after_unix_s,
                        "TLS certificate reloaded: new connections get it"
                    );
                    ReloadOutcome {
                        listener: l.name().to_string(),
                        reloaded: true,
                        certificate: info,
                        error: None,
                    }
                }
                Err(e) => {
                    metrics.tls_reload(false);
                    tracing::error!(
                        listener = %l.name(),
                        "TLS reload failed, the previous certificate stays in use: {e}"
                    );
                    ReloadOutcome {
                        listener: l.name().to_string(),
                        reloaded: false,
                        certificate: l.info(),
                        error: Some(e.to_string()),
                    }
                }
            })
            .collect()
    }
}

fn read(listener: &ListenerName, what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        listener: listener.clone(),
        what,
        path: path.to_owned(),
        source,
    })
}

/// A PEM error in general terms: rustls-pki-types' own messages may quote a line of the
/// file, and a key file's lines are secret.
fn pem_why(e: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error;
    match e {
        Error::MissingSectionEnd { .. } => "a PEM section has no END line".into(),
        Error::IllegalSectionStart { .. } => "a PEM BEGIN line is malformed".into(),
        Error::Base64Decode(_) => "a PEM section's base64 is damaged".into(),
        Error::NoItemsFound => "no PEM section of the expected kind".into(),
        Error::SectionTooLarge => "a PEM section is too large".into(),
        _ => "not readable as PEM".into(),
    }
}

fn certificates(
    listener: &ListenerName,
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(listener, what, path)?;
    let content = |why: String| TlsError::Content {
        listener: listener.clone(),
        what,
        path: path.to_owned(),
        why,
    };
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| content(pem_why(&e)))?;
    if certs.is_empty() {
        return Err(content("no CERTIFICATE section".into()));
    }
    Ok(certs)
}

/// Builds a listener's rustls configuration from its files.
fn build(listener: &ListenerName, settings: &SslSection) -> Result<Loaded, TlsError> {
    let refused = |why: String| TlsError::Refused {
        listener: listener.clone(),
        why,
    };
    // rustls 0.23.48 marks ring's provider deprecated because ring has no post-quantum
    // key exchange (ML-KEM); it is the provider that builds here with the C compiler
    // alone (aws-lc-rs, which has ML-KEM, needs more of the build machine and minutes of
    // build time). X25519, P-256 and P-384 key exchange are offered.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = settings
        .enabled_protocols
        .iter()
        .filter_map(|p| match p.as_str() {
            "TLSv1.3" => Some(&rustls::version::TLS13),
            "TLSv1.2" => Some(&rustls::version::TLS12),
            _ => None,
        })
        .collect();
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| refused(e.to_string()))?;
    let builder = match settings.client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        auth => {
            let Some(path) = &settings.client_ca else {
                return Err(refused("client_auth needs client_ca".into()));
            };
            let mut roots = RootCertStore::empty();
            for cert in certificates(listener, "client_ca", path)? {
                roots.add(cert).map_err(|e| TlsError::Content {
                    listener: listener.clone(),
                    what: "client_ca",
                    path: path.clone(),
                    why: format!("a CA certificate cannot be used: {e}"),
                })?;
            }
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider));
            let verifier = if auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| refused(format!("client_ca: {e}")))?,
            )
        }
    };
    let (Some(chain_path), Some(key_path)) = (&settings.certificate_chain, &settings.private_key)
    else {
        return Err(refused(
            "certificate_chain and private_key are required".into(),
        ));
    };
    let chain = certificates(listener, "certificate_chain", chain_path)?;
    let info = certificate_info(listener, &chain).map_err(|why| TlsError::Content {
        listener: listener.clone(),
        what: "certificate_chain",
        path: chain_path.clone(),
        why,
    })?;
    let key = {
        let bytes = read(listener, "private_key", key_path)?;
        PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| TlsError::Content {
            listener: listener.clone(),
            what: "private_key",
            path: key_path.clone(),
            why: match e {
                rustls::pki_types::pem::Error::NoItemsFound => {
                    "no PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY section (an encrypted \
                     key is not read: decrypt it and protect the file by its mode)"
                        .into()
                }
                other => pem_why(&other),
            },
        })?
    };
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|e| refused(format!("certificate_chain and private_key: {e}")))?;
    Ok(Loaded {
        acceptor: TlsAcceptor::from(Arc::new(config)),
        info,
    })
}

fn certificate_info(
    listener: &ListenerName,
    chain: &[CertificateDer<'_>],
) -> Result<CertificateInfo, String> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let first = chain.first().ok_or("no certificate")?;
    let (_, cert) = X509Certificate::from_der(first.as_ref())
        .map_err(|e| format!("the first certificate cannot be parsed: {e}"))?;
    Ok(CertificateInfo {
        listener: listener.to_string(),
        subject: subject_rfc2253(first.as_ref()).map_err(|e| e.to_string())?,
        not_after_unix_s: cert.validity().not_after.timestamp(),
        chain_length: chain.len(),
    })
}

/// Why a TLS handshake did not give a connection. [`HandshakeFailure::reason`] is the
/// metric's label.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeFailure {
    /// Not finished within the first-request deadline.
    #[error("the TLS handshake did not finish within server.first_request_timeout_ms")]
    Timeout,
    /// The first byte cannot start a TLS handshake: plaintext on a TLS port.
    #[error("the client does not speak TLS (first byte {0:#04x}; plaintext to a TLS listener?)")]
    NotTls(u8),
    /// The client left during the handshake.
    #[error("the client closed the connection during the TLS handshake")]
    Closed,
    /// The client's certificate was refused (none, or not from `client_ca`).
    #[error("client certificate refused: {0}")]
    ClientCertificate(String),
    /// The client refused the handshake with an alert (e.g. it does not trust the
    /// broker's certificate).
    #[error("the client ended the handshake: {0}")]
    Alert(String),
    /// No common protocol version or cipher suite.
    #[error("no TLS version or cipher suite in common: {0}")]
    Incompatible(String),
    /// Any other TLS error.
    #[error("TLS error: {0}")]
    Protocol(String),
    /// No mapping rule applies to the certificate's subject.
    #[error(
        "no ssl.principal_mapping_rules rule applies to the client certificate's subject `{0}`"
    )]
    NoPrincipal(String),
}

impl HandshakeFailure {
    /// The label of `drover_tls_handshake_failures_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            HandshakeFailure::Timeout => "timeout",
            HandshakeFailure::NotTls(_) => "not_tls",
            HandshakeFailure::Closed => "closed",
            HandshakeFailure::ClientCertificate(_) => "client_certificate",
            HandshakeFailure::Alert(_) => "alert",
            HandshakeFailure::Incompatible(_) => "incompatible",
            HandshakeFailure::Protocol(_) => "protocol",
            HandshakeFailure::NoPrincipal(_) => "no_principal",
        }
    }

    fn from_io(e: std::io::Error) -> HandshakeFailure {
        use std::io::ErrorKind;
        if let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
            return match tls {
                rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented => {
                    HandshakeFailure::ClientCertificate(tls.to_string())
                }
                rustls::Error::AlertReceived(_) => HandshakeFailure::Alert(tls.to_string()),
                rustls::Error::PeerIncompatible(_) => {
                    HandshakeFailure::Incompatible(tls.to_string())
                }
                other => HandshakeFailure::Protocol(other.to_string()),
            };
        }
        match e.kind() {
            ErrorKind::UnexpectedEof
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::BrokenPipe => HandshakeFailure::Closed,
            _ => HandshakeFailure::Protocol(e.to_string()),
        }
    }
}

/// Runs the server side of a TLS handshake on `socket` for `listener`, to be finished
/// by `deadline`, and names the client: its certificate's subject through the
/// listener's mapping rules, or `User:ANONYMOUS` without one.
pub async fn handshake(
    listener: &TlsListener,
    socket: TcpStream,
    deadline: Instant,
) -> Result<(TlsStream<TcpStream>, Principal), HandshakeFailure> {
    let loaded = listener.current();
    let stream = tokio::time::timeout_at(deadline, async {
        // Plaintext Kafka starts with a frame size whose first byte is 0 for any frame
        // below 16 MiB: tell it apart before rustls reads it as a record.
        let mut first = [0u8; 1];
        match socket.peek(&mut first).await {
            Ok(0) => return Err(HandshakeFailure::Closed),
            Ok(_) if first[0] != TLS_HANDSHAKE_RECORD => {
                return Err(HandshakeFailure::NotTls(first[0]))
            }
            Ok(_) => {}
            Err(e) => return Err(HandshakeFailure::from_io(e)),
        }
        loaded
            .acceptor
            .accept(socket)
            .await
            .map_err(HandshakeFailure::from_io)
    })
    .await
    .map_err(|_| HandshakeFailure::Timeout)??;
    let principal = match stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
    {
        None => Principal::anonymous(),
        Some(cert) => {
            let subject = subject_rfc2253(cert.as_ref())
                .map_err(|e| HandshakeFailure::ClientCertificate(e.to_string()))?;
            match listener.mapper.name(&subject) {
                Some(name) => Principal::user(name),
                None => return Err(HandshakeFailure::NoPrincipal(subject)),
            }
        }
    };
    Ok((stream, principal))
}
