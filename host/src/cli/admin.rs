//! `drover admin ...`: the admin HTTP API from the command line (HTTP/1.1, one request
//! per connection; over TLS when the address is `https://…` or a CA file is given; with
//! a bearer token and/or a client certificate when given).

use std::{
    io::{Read, Write},
    net::{TcpStream, ToSocketAddrs},
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer, ServerName};

/// The credentials `drover admin` and `drover plugins rescan|list --admin` present to
/// the admin API (docs/security.md, "The admin API"); each also from its environment
/// variable.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Credentials {
    /// A file holding the admin API's bearer token (`admin.token_file`): sent as
    /// `Authorization: Bearer …`.
    #[arg(long, env = "DROVER_ADMIN_TOKEN_FILE", global = true)]
    pub token_file: Option<PathBuf>,
    /// PEM file with the CA certificate(s) the admin listener's certificate is checked
    /// against; speaks TLS (as an `https://` address does).
    #[arg(long, env = "DROVER_ADMIN_CA_FILE", global = true)]
    pub ca_file: Option<PathBuf>,
    /// PEM file with a client certificate (chain) for mTLS (`admin.ssl.client_auth`).
    #[arg(
        long,
        env = "DROVER_ADMIN_CERT_FILE",
        global = true,
        requires = "key_file"
    )]
    pub cert_file: Option<PathBuf>,
    /// PEM file with the client certificate's private key (unencrypted).
    #[arg(
        long,
        env = "DROVER_ADMIN_KEY_FILE",
        global = true,
        requires = "cert_file"
    )]
    pub key_file: Option<PathBuf>,
}

/// Where the admin API is and what to present to it.
#[derive(Clone)]
pub struct Target {
    /// `HOST:PORT`, as given (the `Host` header).
    authority: String,
    /// TLS settings, when it speaks TLS.
    tls: Option<(Arc<rustls::ClientConfig>, ServerName<'static>)>,
    /// The bearer token.
    token: Option<String>,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        write!(f, "{scheme}://{}", self.authority)
    }
}

fn read_pem<T>(
    what: &str,
    path: &Path,
    parse: impl FnOnce(&[u8]) -> Result<T, rustls::pki_types::pem::Error>,
) -> Result<T, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{what} {}: {e}", path.display()))?;
    // The parser's own message may quote the file; say only which file and what kind.
    parse(&bytes).map_err(|_| format!("{what} {}: no usable PEM section", path.display()))
}

impl Target {
    /// `admin` (`HOST:PORT`, `http://HOST:PORT` or `https://HOST:PORT`) with
    /// `credentials`. Errors name files, never their contents.
    pub fn new(admin: &str, credentials: &Credentials) -> Result<Target, String> {
        let (https, authority) = match admin.split_once("://") {
            Some(("https", rest)) => (true, rest),
            Some(("http", rest)) => (false, rest),
            Some((scheme, _)) => return Err(format!("--admin: unknown scheme `{scheme}`")),
            None => (false, admin),
        };
        let authority = authority.trim_end_matches('/').to_owned();
        let token = match &credentials.token_file {
            Some(path) => Some(read_token(path)?),
            None => None,
        };
        let tls = if https || credentials.ca_file.is_some() {
            let Some(ca) = &credentials.ca_file else {
                return Err(
                    "an https:// admin address needs --ca-file (the CA that signed the \
                     admin listener's certificate)"
                        .into(),
                );
            };
            let mut roots = rustls::RootCertStore::empty();
            let certs = read_pem("--ca-file", ca, |b| {
                CertificateDer::pem_slice_iter(b).collect::<Result<Vec<_>, _>>()
            })?;
            if certs.is_empty() {
                return Err(format!("--ca-file {}: no certificate", ca.display()));
            }
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| format!("--ca-file {}: {e}", ca.display()))?;
            }
            #[allow(deprecated)] // ring: the provider this build has (server/tls.rs)
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let builder = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .with_root_certificates(roots);
            let config = match (&credentials.cert_file, &credentials.key_file) {
                (Some(cert), Some(key)) => {
                    let chain = read_pem("--cert-file", cert, |b| {
                        CertificateDer::pem_slice_iter(b).collect::<Result<Vec<_>, _>>()
                    })?;
                    let key = read_pem("--key-file", key, PrivateKeyDer::from_pem_slice)?;
                    builder
                        .with_client_auth_cert(chain, key)
                        .map_err(|e| format!("--cert-file and --key-file: {e}"))?
                }
                _ => builder.with_no_client_auth(),
            };
            let host = host_of(&authority);
            let name = ServerName::try_from(host.to_owned())
                .map_err(|_| format!("--admin: `{host}` is not a host name or IP address"))?;
            Some((Arc::new(config), name))
        } else {
            if credentials.cert_file.is_some() {
                return Err("--cert-file needs TLS: an https:// address and --ca-file".into());
            }
            None
        };
        Ok(Target {
            authority,
            tls,
            token,
        })
    }
}

/// The host of `HOST:PORT` (an IPv6 address without its brackets).
fn host_of(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    authority
        .rsplit_once(':')
        .map_or(authority, |(host, _)| host)
}

/// The token in `path` (one line; the final newline dropped). Its contents never reach
/// an error.
fn read_token(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--token-file {}: {e}", path.display()))?;
    let token = text.trim_end_matches(['\n', '\r']);
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "--token-file {}: not one line of visible ASCII characters",
            path.display()
        ));
    }
    Ok(token.to_owned())
}

/// Sends one request to the admin API at `target`; returns the status code and body.
pub fn http(
    target: &Target,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<(u16, String), String> {
    let err = |e: std::io::Error| format!("admin API at {target}: {e}");
    let addrs = target
        .authority
        .to_socket_addrs()
        .map_err(|e| format!("admin API at {target}: {e}"))?;
    let mut last = None;
    let mut stream = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let stream = match (stream, last) {
        (Some(s), _) => s,
        (None, Some(e)) => return Err(err(e)),
        (None, None) => return Err(format!("admin API at {target}: no address")),
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(err)?;
    let body = body.unwrap_or("");
    let authorization = match &target.token {
        Some(token) => format!("Authorization: Bearer {token}\r\n"),
        None => String::new(),
    };
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{authorization}\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        target.authority,
        body.len()
    );
    let mut raw = Vec::new();
    match &target.tls {
        None => {
            let mut stream = stream;
            stream.write_all(request.as_bytes()).map_err(err)?;
            stream.read_to_end(&mut raw).map_err(err)?;
        }
        Some((config, name)) => {
            let connection = rustls::ClientConnection::new(Arc::clone(config), name.clone())
                .map_err(|e| format!("admin API at {target}: {e}"))?;
            let mut tls = rustls::StreamOwned::new(connection, stream);
            tls.write_all(request.as_bytes()).map_err(err)?;
            tls.flush().map_err(err)?;
            match tls.read_to_end(&mut raw) {
                Ok(_) => {}
                // A server that closes without close_notify after a whole answer.
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
                Err(e) => return Err(err(e)),
            }
        }
    }
    let text = String::from_utf8_lossy(&raw);
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("admin API at {target}: malformed response"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("admin API at {target}: no status line"))?;
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    Ok((status, body))
}

/// Percent-encodes `segment` for a URL path (everything but unreserved characters).
pub fn encode_segment(segment: &str) -> String {
    let mut out = String::new();
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes a chunked body.
fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

/// Prints the body of `GET path`; an error unless the status is 200.
pub fn get(target: &Target, path: &str) -> Result<(), String> {
    let (status, body) = http(target, "GET", path, None)?;
    println!("{body}");
    if status == 200 {
        Ok(())
    } else {
        Err(format!("HTTP {status}"))
    }
}

/// `drover admin transactions partitions [--hanging]`: the transactions open in the
/// broker's partitions, as JSON (`--hanging`: only those nothing will end).
pub fn transactions_in_partitions(target: &Target, hanging: bool) -> Result<(), String> {
    let (status, body) = http(target, "GET", "/v1/transactions/partitions", None)?;
    if status != 200 {
        return Err(format!("HTTP {status}: {body}"));
    }
    if !hanging {
        println!("{body}");
        return Ok(());
    }
    let mut listed: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("bad answer: {e}: {body}"))?;
    if let Some(open) = listed["open"].as_array_mut() {
        open.retain(|t| t["hanging"].as_bool() == Some(true));
    }
    println!("{listed}");
    Ok(())
}

/// `drover admin transactions abort`: ends a hanging transaction in one partition.
pub fn abort_transaction(
    target: &Target,
    topic: &str,
    partition: i32,
    producer_id: i64,
) -> Result<(), String> {
    let body = serde_json::json!({
        "topic": topic,
        "partition": partition,
        "producer_id": producer_id,
    })
    .to_string();
    let (status, answer) = http(target, "POST", "/v1/transactions/abort", Some(&body))?;
    if status != 200 {
        return Err(format!("abort refused (HTTP {status}): {}", answer.trim()));
    }
    println!("{answer}");
    Ok(())
}

/// `drover admin offset-store status`.
pub fn offset_store_status(target: &Target) -> Result<(), String> {
    let (status, body) = http(target, "GET", "/v1/offset-store", None)?;
    println!("{body}");
    if status == 200 {
        Ok(())
    } else {
        Err(format!("HTTP {status}"))
    }
}

/// `drover plugins list --admin`: the plugin directory as the broker at `target` has it
/// (`GET /v1/plugins`), with each assignor's slow state, as a table or JSON lines.
/// Errors: the broker is unreachable or answers something else than the rows.
pub fn plugins_list(target: &Target, json: bool) -> Result<(), String> {
    let (status, body) = http(target, "GET", "/v1/plugins", None)?;
    if status != 200 {
        return Err(format!("GET /v1/plugins failed (HTTP {status}): {body}"));
    }
    let rows: Vec<drover_host::plugins::table::Row> =
        serde_json::from_str(&body).map_err(|e| format!("bad plugin rows: {e}: {body}"))?;
    if json {
        for row in rows {
            println!("{}", row.to_json());
        }
    } else {
        print!("{}", drover_host::plugins::table::render(&rows));
    }
    Ok(())
}

/// `drover plugins rescan`: asks the broker at `target` to rescan its plugin directory and
/// prints the report (`json`: the admin API's answer as is). Errors: the broker is
/// unreachable or the rescan could not run.
pub fn plugins_rescan(target: &Target, json: bool) -> Result<(), String> {
    let (status, body) = http(target, "POST", "/v1/plugins/rescan", None)?;
    if status != 200 {
        return Err(format!("rescan failed (HTTP {status}): {body}"));
    }
    if json {
        println!("{body}");
        return Ok(());
    }
    let report: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("bad rescan report: {e}: {body}"))?;
    for what in ["added", "replaced", "removed"] {
        for c in report[what].as_array().into_iter().flatten() {
            let note = c["note"]
                .as_str()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default();
            println!(
                "{what}: {} {} {} from {}{note}",
                c["kind"].as_str().unwrap_or("?"),
                c["name"].as_str().unwrap_or("?"),
                c["version"].as_str().unwrap_or("?"),
                c["file"].as_str().unwrap_or("?"),
            );
        }
    }
    for r in report["refused"].as_array().into_iter().flatten() {
        println!(
            "refused: {}: {}",
            r["file"].as_str().unwrap_or("?"),
            r["reason"].as_str().unwrap_or("?")
        );
    }
    println!(
        "{} file(s) unchanged; {} of at most {} plugin libraries loaded",
        report["unchanged"], report["libraries_loaded"], report["max_loaded_libraries"]
    );
    Ok(())
}

/// `drover admin offset-store swap`: starts the swap, then follows it until it
/// completes (exit 0) or fails (exit 1, with the reason).
pub fn offset_store_swap(
    target: &Target,
    plugin: &str,
    config_text: &str,
    wait: bool,
) -> Result<(), String> {
    let body = serde_json::json!({ "plugin": plugin, "config": config_text }).to_string();
    let (status, answer) = http(target, "POST", "/v1/offset-store", Some(&body))?;
    if status != 202 {
        return Err(format!("swap refused (HTTP {status}): {answer}"));
    }
    if !wait {
        println!("{answer}");
        return Ok(());
    }
    let mut last = String::new();
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let (_, body) = http(target, "GET", "/v1/offset-store", None)?;
        let view: serde_json::Value =
            serde_json::from_str(&body).map_err(|e| format!("bad status: {e}: {body}"))?;
        let swap = &view["swap"];
        let state = swap["state"].as_str().unwrap_or("").to_owned();
        let line = format!(
            "{state}: {} -> {}, copied {}/{}",
            swap["from"].as_str().unwrap_or("?"),
            swap["to"].as_str().unwrap_or("?"),
            swap["copied"],
            swap["total"]
        );
        if line != last {
            println!("{line}");
            last = line;
        }
        match state.as_str() {
            "completed" => {
                println!(
                    "active offset store: {}",
                    view["active"].as_str().unwrap_or("?")
                );
                return Ok(());
            }
            "failed" => {
                return Err(format!(
                    "swap failed, still on `{}`: {}",
                    view["active"].as_str().unwrap_or("?"),
                    swap["error"].as_str().unwrap_or("unknown error")
                ))
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_path_segments() {
        assert_eq!(encode_segment("a/b c?"), "a%2Fb%20c%3F");
        assert_eq!(encode_segment("grp-1.x_y~"), "grp-1.x_y~");
    }

    #[test]
    fn dechunks() {
        assert_eq!(
            dechunk("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
            "hello world"
        );
    }
}
