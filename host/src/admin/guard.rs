//! Who may use the admin API, and how (issue 29 item 6; docs/security.md, "The admin
//! API"). Every request passes [`Guard::check`] before its handler, in this order:
//!
//! 1. **Host**: the `Host` header must name the listener — its own IP address (the
//!    bound one, or the one the connection arrived on when bound to every interface),
//!    any loopback name (`localhost`, `127.0.0.1`, `[::1]`) when the connection
//!    arrived on loopback, or one of `admin.host_names` — else 421. A web page the
//!    operator opens cannot reach the API through DNS rebinding: the browser sends the
//!    attacker's name.
//! 2. **Public reads**: `GET`/`HEAD` of a path in `admin.public_read`, and of the web
//!    console's files (`/console/...`: the same embedded bytes for everyone, no data;
//!    [`super::console`]), go through without credentials.
//! 3. **Authentication**, when one is configured (`admin.token_file`,
//!    `admin.ssl.client_auth`): a client certificate the TLS handshake verified (and,
//!    with `admin.principals`, one of them: else 403), or `Authorization: Bearer
//!    <token>` matching the token file (compared in constant time, as SHA-256 digests,
//!    so neither its bytes nor its length show in the timing), else 401. Without one
//!    (loopback only, [`crate::config::AdminSection::check`]) every request is
//!    authenticated, as before.
//! 4. **Mutations** (every method but `GET` and `HEAD`) need `Content-Type:
//!    application/json`, whether or not they carry a body, else 415: a browser sends
//!    JSON cross-site only after a CORS preflight, which this API never approves (it
//!    sends no CORS headers), so no form or `text/plain` POST from a web page can act.
//!
//! Refusals are counted (`drover_admin_requests_refused_total{reason}`) and logged at
//! most once a second per reason, with the client's address, the method and the path;
//! never a header's value.

use std::{
    net::{IpAddr, SocketAddr},
    path::{Path, PathBuf},
    sync::RwLock,
};

use axum::http::{header, HeaderMap, Method, StatusCode};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::{AdminSection, ClientAuth};

/// The shortest token a token file may hold.
pub const MIN_TOKEN_LEN: usize = 16;

/// Who is on the other end of an admin connection.
#[derive(Debug, Clone)]
pub struct AdminPeer {
    /// The client's address.
    pub remote: SocketAddr,
    /// The address the connection arrived on (the listener's, or with an unspecified
    /// bind the interface's).
    pub local: SocketAddr,
    /// With TLS and a client certificate the handshake verified: its principal
    /// (`User:<name>`, after `admin.ssl.principal_mapping_rules`).
    pub principal: Option<String>,
}

/// A refused request: its status and its metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The `Host` header names something else than this listener (421).
    Host,
    /// No valid credentials (401).
    Unauthenticated,
    /// A verified client certificate whose principal is not in `admin.principals` (403).
    Forbidden,
    /// A mutation without `Content-Type: application/json` (415).
    ContentType,
}

impl Refusal {
    /// The HTTP status answered.
    pub fn status(self) -> StatusCode {
        match self {
            Refusal::Host => StatusCode::MISDIRECTED_REQUEST,
            Refusal::Unauthenticated => StatusCode::UNAUTHORIZED,
            Refusal::Forbidden => StatusCode::FORBIDDEN,
            Refusal::ContentType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        }
    }

    /// The `reason` label of `drover_admin_requests_refused_total`.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::Host => "host",
            Refusal::Unauthenticated => "unauthenticated",
            Refusal::Forbidden => "forbidden",
            Refusal::ContentType => "content_type",
        }
    }

    /// The key its log lines are rate-limited by.
    pub fn log_key(self) -> &'static str {
        match self {
            Refusal::Host => "admin.refused.host",
            Refusal::Unauthenticated => "admin.refused.unauthenticated",
            Refusal::Forbidden => "admin.refused.forbidden",
            Refusal::ContentType => "admin.refused.content_type",
        }
    }

    /// The answer's message.
    pub fn message(self) -> &'static str {
        match self {
            Refusal::Host => {
                "the Host header does not name this admin listener (see admin.host_names)"
            }
            Refusal::Unauthenticated => "authentication required",
            Refusal::Forbidden => "this client certificate's principal is not in admin.principals",
            Refusal::ContentType => {
                "a request that changes something needs Content-Type: application/json"
            }
        }
    }
}

/// The admin API's access rules, built once at startup from `[admin]`; the token is
/// read again from its file at SIGHUP and `POST /v1/tls/reload`
/// ([`Guard::reload_token`]).
pub struct Guard {
    /// SHA-256 of the token, when a token file is configured.
    token: RwLock<Option<[u8; 32]>>,
    /// `admin.token_file`.
    token_file: Option<PathBuf>,
    /// Whether a verified client certificate authenticates.
    certificates: bool,
    /// With certificates: the principals allowed (empty: all).
    principals: Vec<String>,
    /// `admin.host_names`, lower case, without a trailing dot; IP addresses parsed.
    names: Vec<String>,
    ips: Vec<IpAddr>,
    /// The bound address.
    bound: SocketAddr,
    public_read: Vec<String>,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("token", &self.token_digest().map(|_| "<set>"))
            .field("certificates", &self.certificates)
            .field("bound", &self.bound)
            .finish_non_exhaustive()
    }
}

/// Reads the token in `path`: one line (a final newline is dropped), at least
/// [`MIN_TOKEN_LEN`] visible ASCII characters, in a file no one but its owner may read.
/// Errors name the file and what is wrong, never its contents.
pub fn read_token_file(path: &Path) -> Result<String, String> {
    let what = |why: &str| format!("admin.token_file {}: {why}", path.display());
    let token = crate::secret_file::read_secret_line("admin.token_file", path)?;
    if token.len() < MIN_TOKEN_LEN {
        return Err(what(&format!(
            "the token must be at least {MIN_TOKEN_LEN} characters"
        )));
    }
    if !token.iter().all(|b| b.is_ascii_graphic()) {
        return Err(what(
            "the token must be one line of visible ASCII characters (no spaces)",
        ));
    }
    Ok(String::from_utf8_lossy(&token).into_owned())
}

impl Guard {
    /// The rules of `section` for a listener bound to `bound`; reads the token file.
    pub fn load(section: &AdminSection, bound: SocketAddr) -> Result<Guard, String> {
        let token = match &section.token_file {
            Some(path) => Some(digest(read_token_file(path)?.as_bytes())),
            None => None,
        };
        Ok(Guard::new(section, bound, token))
    }

    /// Reads the token file again and serves its token from now on; `None` when no
    /// token file is configured. A file that cannot be read or holds no acceptable
    /// token leaves the previous token in force; the error names the file, never its
    /// contents. Blocking (a file read).
    pub fn reload_token(&self) -> Option<Result<(), String>> {
        let path = self.token_file.as_ref()?;
        Some(read_token_file(path).map(|token| {
            *self.token.write().unwrap_or_else(|e| e.into_inner()) = Some(digest(token.as_bytes()));
        }))
    }

    fn token_digest(&self) -> Option<[u8; 32]> {
        *self.token.read().unwrap_or_else(|e| e.into_inner())
    }

    fn new(section: &AdminSection, bound: SocketAddr, token: Option<[u8; 32]>) -> Guard {
        let mut names = Vec::new();
        let mut ips = Vec::new();
        for name in &section.host_names {
            match parse_ip(name) {
                Some(ip) => ips.push(ip),
                None => names.push(normalise(name)),
            }
        }
        Guard {
            token: RwLock::new(token),
            token_file: section.token_file.clone(),
            certificates: section.ssl.client_auth != ClientAuth::None,
            principals: section.principals.clone(),
            names,
            ips,
            bound,
            public_read: section.public_read.clone(),
        }
    }

    /// Whether requests need credentials.
    fn authenticates(&self) -> bool {
        self.token_digest().is_some() || self.certificates
    }

    /// Whether `host` (the `Host` header's value, `None` without one) names this
    /// listener for a connection that arrived on `local`.
    pub fn host_allowed(&self, host: Option<&str>, local: SocketAddr) -> bool {
        let Some(host) = host.map(strip_port) else {
            return false;
        };
        let loopback = local.ip().is_loopback() || self.bound.ip().is_loopback();
        match parse_ip(host) {
            Some(ip) => {
                (!self.bound.ip().is_unspecified() && same_ip(ip, self.bound.ip()))
                    || same_ip(ip, local.ip())
                    || (loopback && ip.is_loopback())
                    || self.ips.iter().any(|a| same_ip(ip, *a))
            }
            None => {
                let host = normalise(host);
                (loopback && host == "localhost") || self.names.contains(&host)
            }
        }
    }

    /// Whether a request with `headers` from `peer` is authenticated: `Err` says why
    /// not.
    pub fn authenticate(&self, headers: &HeaderMap, peer: &AdminPeer) -> Result<(), Refusal> {
        if !self.authenticates() {
            return Ok(());
        }
        let mut refusal = Refusal::Unauthenticated;
        if self.certificates {
            if let Some(principal) = &peer.principal {
                if self.principals.is_empty() || self.principals.contains(principal) {
                    return Ok(());
                }
                refusal = Refusal::Forbidden;
            }
        }
        if let (Some(token), Some(offered)) = (self.token_digest(), bearer(headers)) {
            if bool::from(digest(offered.as_bytes()).ct_eq(&token)) {
                return Ok(());
            }
        }
        Err(refusal)
    }

    /// The whole check of one request (module docs).
    pub fn check(
        &self,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
        peer: &AdminPeer,
    ) -> Result<(), Refusal> {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        if !self.host_allowed(host, peer.local) {
            return Err(Refusal::Host);
        }
        let read = method == Method::GET || method == Method::HEAD;
        if read
            && (self.public_read.iter().any(|p| p == path) || super::console::is_console_path(path))
        {
            return Ok(());
        }
        self.authenticate(headers, peer)?;
        if !read && !json_content_type(headers) {
            return Err(Refusal::ContentType);
        }
        Ok(())
    }
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// The token of an `Authorization: Bearer <token>` header (RFC 6750; the scheme's
/// case does not matter).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Whether the `Content-Type` is `application/json` (any parameters, any case).
pub fn json_content_type(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// `host` without a `:port` (an IPv6 address keeps its brackets).
fn strip_port(host: &str) -> &str {
    let host = host.trim();
    if host.starts_with('[') {
        return match host.find(']') {
            Some(end) => &host[..=end],
            None => host,
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            name
        }
        _ => host,
    }
}

/// An IP address as a `Host` header or `admin.host_names` writes it (IPv6 in brackets
/// or bare).
fn parse_ip(host: &str) -> Option<IpAddr> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse().ok()
}

/// IPv4-mapped IPv6 addresses are their IPv4 address.
fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

fn normalise(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn guard(toml: &str, bound: &str, token: Option<&str>) -> Guard {
        let section: AdminSection = toml::from_str(toml).unwrap();
        Guard::new(
            &section,
            bound.parse().unwrap(),
            token.map(|t| digest(t.as_bytes())),
        )
    }

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append(name.clone(), HeaderValue::from_str(value).unwrap());
        }
        h
    }

    fn peer(local: &str, principal: Option<&str>) -> AdminPeer {
        AdminPeer {
            remote: "192.0.2.7:40000".parse().unwrap(),
            local: local.parse().unwrap(),
            principal: principal.map(str::to_owned),
        }
    }

    #[test]
    fn loopback_listener_takes_loopback_names_and_its_address_only() {
        let g = guard("", "127.0.0.1:9644", None);
        let local = "127.0.0.1:9644".parse().unwrap();
        for host in [
            "127.0.0.1:9644",
            "127.0.0.1",
            "localhost:9644",
            "LocalHost.",
            "[::1]:9644",
            "[::1]",
            "127.0.0.2:1",
        ] {
            assert!(g.host_allowed(Some(host), local), "{host}");
        }
        for host in [
            "evil.example.com:9644",
            "localhost.evil.example.com",
            "10.0.0.1:9644",
            "",
            "127.0.0.1.nip.io:9644",
        ] {
            assert!(!g.host_allowed(Some(host), local), "{host}");
        }
        assert!(!g.host_allowed(None, local), "no Host header");
    }

    #[test]
    fn other_addresses_take_their_own_ip_and_configured_names() {
        let g = guard(
            "host_names = ['Admin.Example.com', '203.0.113.9', '2001:db8::1']",
            "0.0.0.0:9644",
            None,
        );
        let local = "10.1.2.3:9644".parse().unwrap();
        for host in [
            "10.1.2.3:9644",
            "admin.example.com",
            "ADMIN.example.com.:443",
            "203.0.113.9",
            "[2001:db8::1]:9644",
        ] {
            assert!(g.host_allowed(Some(host), local), "{host}");
        }
        for host in [
            "localhost",
            "127.0.0.1",
            "[::1]",
            "0.0.0.0",
            "other.example.com",
        ] {
            assert!(!g.host_allowed(Some(host), local), "{host}");
        }
        // A specific bind: that address, whatever the connection's.
        let g = guard("", "10.9.9.9:9644", None);
        assert!(g.host_allowed(Some("10.9.9.9:9644"), "10.9.9.9:9644".parse().unwrap()));
        assert!(!g.host_allowed(Some("localhost"), "10.9.9.9:9644".parse().unwrap()));
    }

    #[test]
    fn mutations_need_a_json_content_type() {
        let g = guard("", "127.0.0.1:9644", None);
        let p = peer("127.0.0.1:9644", None);
        let host = (header::HOST, "127.0.0.1:9644");
        for ct in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
        ] {
            let h = headers(&[host.clone(), (header::CONTENT_TYPE, ct)]);
            assert_eq!(
                g.check(&Method::POST, "/v1/plugins/rescan", &h, &p),
                Ok(()),
                "{ct}"
            );
        }
        for ct in [
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            Some("application/jsonx"),
            None,
        ] {
            let mut h = headers(std::slice::from_ref(&host));
            if let Some(ct) = ct {
                h.insert(header::CONTENT_TYPE, HeaderValue::from_str(ct).unwrap());
            }
            for method in [Method::POST, Method::PUT, Method::DELETE, Method::PATCH] {
                assert_eq!(
                    g.check(&method, "/v1/plugins/rescan", &h, &p),
                    Err(Refusal::ContentType),
                    "{method} {ct:?}"
                );
            }
            assert_eq!(g.check(&Method::GET, "/v1/plugins", &h, &p), Ok(()));
        }
    }

    #[test]
    fn the_console_files_are_open_but_its_data_needs_the_token() {
        let g = guard("", "127.0.0.1:9644", Some("s3cret-token-0123456789"));
        let p = peer("127.0.0.1:9644", None);
        let none = headers(&[(header::HOST, "localhost:9644")]);
        for path in [
            "/console",
            "/console/",
            "/console/app.js",
            "/console/pages/group.js",
        ] {
            assert_eq!(g.check(&Method::GET, path, &none, &p), Ok(()), "{path}");
        }
        for (method, path) in [
            (Method::GET, "/v1/overview"),
            (Method::GET, "/v1/groups"),
            (Method::GET, "/v1/groups/g/rebalances"),
            (Method::POST, "/console/"),
            (Method::GET, "/consoles"),
        ] {
            assert_eq!(
                g.check(&method, path, &none, &p),
                Err(Refusal::Unauthenticated),
                "{method} {path}"
            );
        }
        let evil = headers(&[(header::HOST, "evil.example.com")]);
        assert_eq!(
            g.check(&Method::GET, "/console/", &evil, &p),
            Err(Refusal::Host),
            "the Host check holds for the console too"
        );
    }

    #[test]
    fn a_token_is_needed_when_configured_even_on_loopback() {
        let g = guard(
            "public_read = ['/metrics']",
            "127.0.0.1:9644",
            Some("s3cret-token-0123456789"),
        );
        let p = peer("127.0.0.1:9644", None);
        let host = (header::HOST, "localhost:9644");
        let json = (header::CONTENT_TYPE, "application/json");
        let none = headers(&[host.clone(), json.clone()]);
        assert_eq!(
            g.check(&Method::GET, "/v1/topics", &none, &p),
            Err(Refusal::Unauthenticated)
        );
        assert_eq!(
            g.check(&Method::GET, "/metrics", &none, &p),
            Ok(()),
            "public"
        );
        assert_eq!(
            g.check(&Method::POST, "/metrics", &none, &p),
            Err(Refusal::Unauthenticated),
            "public is for reads only"
        );
        for wrong in [
            "Bearer s3cret-token-012345678",
            "Bearer s3cret-token-01234567890",
            "Basic s3cret-token-0123456789",
            "s3cret-token-0123456789",
            "Bearer",
        ] {
            let h = headers(&[host.clone(), json.clone(), (header::AUTHORIZATION, wrong)]);
            assert_eq!(
                g.check(&Method::GET, "/v1/topics", &h, &p),
                Err(Refusal::Unauthenticated),
                "{wrong}"
            );
        }
        let right = headers(&[
            host.clone(),
            json.clone(),
            (header::AUTHORIZATION, "bearer  s3cret-token-0123456789 "),
        ]);
        assert_eq!(
            g.check(&Method::POST, "/v1/plugins/rescan", &right, &p),
            Ok(())
        );
        // The Host check comes first, credentials or not.
        let mut evil = right.clone();
        evil.insert(header::HOST, HeaderValue::from_static("evil.example.com"));
        assert_eq!(
            g.check(&Method::GET, "/metrics", &evil, &p),
            Err(Refusal::Host)
        );
        // A client certificate does not count without client_auth.
        let with_cert = peer("127.0.0.1:9644", Some("User:ops"));
        assert_eq!(
            g.check(&Method::GET, "/v1/topics", &none, &with_cert),
            Err(Refusal::Unauthenticated)
        );
    }

    #[test]
    fn certificates_authenticate_with_mtls_and_principals_narrow_them() {
        let tls = "[ssl]\ncertificate_chain = 'c'\nprivate_key = 'k'\nclient_auth = 'requested'\nclient_ca = 'ca'\n";
        let g = guard(
            &format!("principals = ['User:ops']\n{tls}"),
            "10.0.0.1:9644",
            Some("another-token-0123456789"),
        );
        let h = headers(&[(header::HOST, "10.0.0.1:9644")]);
        assert_eq!(
            g.check(
                &Method::GET,
                "/v1/topics",
                &h,
                &peer("10.0.0.1:9644", Some("User:ops"))
            ),
            Ok(())
        );
        assert_eq!(
            g.check(
                &Method::GET,
                "/v1/topics",
                &h,
                &peer("10.0.0.1:9644", Some("User:dev"))
            ),
            Err(Refusal::Forbidden)
        );
        assert_eq!(
            g.check(&Method::GET, "/v1/topics", &h, &peer("10.0.0.1:9644", None)),
            Err(Refusal::Unauthenticated)
        );
        // The token still works beside certificates.
        let mut with_token = h.clone();
        with_token.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer another-token-0123456789"),
        );
        assert_eq!(
            g.check(
                &Method::GET,
                "/v1/topics",
                &with_token,
                &peer("10.0.0.1:9644", Some("User:dev"))
            ),
            Ok(())
        );
        let any = guard(tls, "10.0.0.1:9644", None);
        assert_eq!(
            any.check(
                &Method::GET,
                "/v1/topics",
                &h,
                &peer("10.0.0.1:9644", Some("User:dev"))
            ),
            Ok(())
        );
    }

    #[test]
    fn token_files_are_checked_and_never_quoted() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        let write = |text: &str, mode: u32| {
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        write("0123456789abcdefXYZ\n", 0o600);
        assert_eq!(read_token_file(&path).unwrap(), "0123456789abcdefXYZ");
        write("0123456789abcdefXYZ\r\n", 0o400);
        assert_eq!(read_token_file(&path).unwrap(), "0123456789abcdefXYZ");
        for (text, mode, wanted) in [
            ("0123456789abcdefXYZ", 0o644, "chmod 600"),
            ("short-secret", 0o600, "at least 16"),
            ("two words secret here", 0o600, "visible ASCII"),
            (
                "line-one-secret-x\nline-two-secret-y\n",
                0o600,
                "visible ASCII",
            ),
        ] {
            write(text, mode);
            let e = read_token_file(&path).unwrap_err();
            assert!(e.contains(wanted), "{text}: {e}");
            assert!(!e.contains("secret"), "the token is quoted: {e}");
        }
        let e = read_token_file(&dir.path().join("missing")).unwrap_err();
        assert!(e.contains("missing"), "{e}");
    }
}
