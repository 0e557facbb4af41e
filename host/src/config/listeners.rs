//! Listeners with Kafka's names (issue 29 item 1): several listeners, each
//! `NAME://HOST:PORT`, each with a security protocol, through Kafka's model of
//! `listeners`, `advertised.listeners` and `listener.security.protocol.map` (Kafka's
//! broker configuration docs; KIP-103, "Separation of Internal and External traffic").
//!
//! In `drover.toml` these are `[server] listeners`, `advertised_listeners` and
//! `listener_security_protocol_map`, with the TLS settings in `[server.ssl]` and, per
//! listener, `[server.listener_ssl.<NAME>]` (Kafka's `listener.name.<name>.ssl.*`).
//! Without `listeners`, `server.listen` and `server.advertised_host` are the shorthand
//! for the one PLAINTEXT listener Drover always had, and the default configuration is
//! unchanged.
//!
//! [`resolve`] turns the `[server]` table into [`ListenerSpec`]s, or a
//! [`ListenerError`] naming the key and the listener. It reads no file: certificates
//! are loaded when the broker starts (server/tls.rs). Every protocol is served: a
//! SASL listener's connections authenticate through server/sasl.rs with the `[sasl]`
//! settings.
//!
//! Where Drover differs from Kafka: a listener that `advertised_listeners` does not
//! name is advertised at its own address (Kafka advertises only what the key names,
//! once it is set), and bind hosts must be IP addresses (an empty host binds every
//! interface, as `0.0.0.0` does).

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt,
    net::{IpAddr, Ipv4Addr, SocketAddr},
    sync::Arc,
};

use serde::{Deserialize, Serialize};

use super::{ServerConfig, SslSection};

/// Kafka's security protocols (Kafka's `SecurityProtocol`): whether a listener speaks
/// TLS and whether clients authenticate with SASL on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum SecurityProtocol {
    /// No TLS, no SASL.
    #[serde(rename = "PLAINTEXT")]
    Plaintext,
    /// TLS; clients may authenticate with a certificate (mTLS).
    #[serde(rename = "SSL")]
    Ssl,
    /// SASL without TLS.
    #[serde(rename = "SASL_PLAINTEXT")]
    SaslPlaintext,
    /// SASL over TLS.
    #[serde(rename = "SASL_SSL")]
    SaslSsl,
}

impl SecurityProtocol {
    /// Every protocol, in Kafka's order.
    pub const ALL: [SecurityProtocol; 4] = [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ];

    /// Kafka's name of the protocol.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// The protocol named `name`, case-insensitively as Kafka's
    /// `SecurityProtocol.forName` reads it.
    pub fn from_name(name: &str) -> Option<SecurityProtocol> {
        Self::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name.trim()))
    }

    /// Whether connections on it speak TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether clients authenticate with SASL on it.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A listener's name, upper-cased as Kafka's `ListenerName.normalised` does: the key
/// that Metadata, DescribeCluster and FindCoordinator look this and other brokers'
/// addresses up by. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ListenerName(Arc<str>);

impl ListenerName {
    /// The name of the single listener of `server.listen`, and of the one every broker
    /// registered before listeners had names.
    pub const PLAINTEXT: &'static str = "PLAINTEXT";

    /// The admin API's TLS listener, as `/v1/tls`, reloads and the TLS metrics name it:
    /// `admin`, lower case, which no Kafka listener's (upper-cased) name can be.
    pub fn admin_api() -> ListenerName {
        ListenerName(Arc::from("admin"))
    }

    /// `name` normalised (upper case), if it is a valid name: 1 to 64 ASCII letters,
    /// digits, `_` or `-`.
    pub fn new(name: &str) -> Option<ListenerName> {
        let valid = (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        valid.then(|| ListenerName(Arc::from(name.to_ascii_uppercase())))
    }

    /// The default listener's name, `PLAINTEXT`.
    pub fn plaintext() -> ListenerName {
        ListenerName(Arc::from(Self::PLAINTEXT))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ListenerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One `NAME://HOST:PORT` entry as written (Kafka's `EndPoint` syntax: an IPv6 host in
/// brackets; an empty host).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointString {
    /// The listener name, normalised.
    pub name: ListenerName,
    /// The host as written, without brackets; may be empty.
    pub host: String,
    /// The port.
    pub port: u16,
}

impl EndpointString {
    /// Parses `NAME://HOST:PORT`. `key` names the setting in errors.
    pub fn parse(key: &'static str, text: &str) -> Result<EndpointString, ListenerError> {
        let bad = |why: &str| ListenerError::Syntax {
            key,
            value: text.to_owned(),
            why: why.to_owned(),
        };
        let text_trimmed = text.trim();
        let (name, rest) = text_trimmed
            .split_once("://")
            .ok_or_else(|| bad("expected NAME://HOST:PORT"))?;
        let name = ListenerName::new(name)
            .ok_or_else(|| bad("the listener name must be 1 to 64 letters, digits, `_` or `-`"))?;
        let (host, port) = if let Some(inner) = rest.strip_prefix('[') {
            let (host, after) = inner
                .split_once(']')
                .ok_or_else(|| bad("an IPv6 host has no closing `]`"))?;
            let port = after
                .strip_prefix(':')
                .ok_or_else(|| bad("expected `:PORT` after the host"))?;
            (host, port)
        } else {
            rest.rsplit_once(':')
                .ok_or_else(|| bad("expected `:PORT` after the host"))?
        };
        if host.contains(|c: char| c.is_whitespace() || c == '/' || c == '[' || c == ']') {
            return Err(bad("the host has characters a host name cannot have"));
        }
        if !rest.starts_with('[') && host.contains(':') {
            return Err(bad("an IPv6 host must be written in brackets, [::1]"));
        }
        let port: u16 = port
            .parse()
            .map_err(|_| bad("the port must be a number from 0 to 65535"))?;
        Ok(EndpointString {
            name,
            host: host.to_owned(),
            port,
        })
    }
}

impl fmt::Display for EndpointString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "{}://[{}]:{}", self.name, self.host, self.port)
        } else {
            write!(f, "{}://{}:{}", self.name, self.host, self.port)
        }
    }
}

/// One listener as the broker runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListenerSpec {
    /// Its name.
    pub name: ListenerName,
    /// Its security protocol (`listener_security_protocol_map`).
    pub protocol: SecurityProtocol,
    /// The address it binds (port 0: any free port).
    pub bind: SocketAddr,
    /// The host clients are told (`advertised_listeners`); `None`: the bound IP
    /// address.
    pub advertised_host: Option<String>,
    /// The port clients are told; `None`: the bound port.
    pub advertised_port: Option<u16>,
    /// Its TLS settings (`[server.listener_ssl.<NAME>]`, else `[server.ssl]`), for the
    /// TLS protocols only.
    pub ssl: Option<SslSection>,
}

/// A listener configuration that cannot work. Each names the key and the listener.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ListenerError {
    /// An entry of `listeners` or `advertised_listeners` does not parse.
    #[error("server.{key}: `{value}`: {why}")]
    Syntax {
        /// `listeners` or `advertised_listeners`.
        key: &'static str,
        /// The entry.
        value: String,
        /// What is wrong.
        why: String,
    },
    /// Two entries of one list have the same name.
    #[error("server.{key}: listener {name} is named twice (each listener needs its own name)")]
    DuplicateName {
        /// `listeners` or `advertised_listeners`.
        key: &'static str,
        /// The name.
        name: ListenerName,
    },
    /// Two listeners bind the same address.
    #[error("server.listeners: listeners {first} and {second} both bind {addr}")]
    DuplicateAddress {
        /// One listener.
        first: ListenerName,
        /// The other.
        second: ListenerName,
        /// The address.
        addr: SocketAddr,
    },
    /// A listener's name is neither in the protocol map nor a protocol's name.
    #[error(
        "listener {listener}: no security protocol: add `{listener} = \"PLAINTEXT\"` (or SSL, \
         SASL_PLAINTEXT, SASL_SSL) to server.listener_security_protocol_map"
    )]
    NoProtocol {
        /// The listener.
        listener: ListenerName,
    },
    /// The protocol map names a protocol Kafka does not have, or has a bad key.
    #[error(
        "server.listener_security_protocol_map: `{key} = \"{value}\"`: expected a listener name \
         and one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"
    )]
    BadProtocolMapEntry {
        /// The key as written.
        key: String,
        /// The value as written.
        value: String,
    },
    /// `advertised_listeners` names a listener `listeners` does not have.
    #[error("server.advertised_listeners: {listener} is not one of server.listeners")]
    UnknownAdvertised {
        /// The name.
        listener: ListenerName,
    },
    /// A bind host is not an IP address.
    #[error(
        "server.listeners: listener {listener} binds `{host}`, which is not an IP address \
         (write the IP, or leave the host empty to bind every interface)"
    )]
    BindHost {
        /// The listener.
        listener: ListenerName,
        /// The host.
        host: String,
    },
    /// A listener binds every interface and nothing says what to advertise.
    #[error(
        "listener {listener} binds {addr}, which clients cannot connect to: name it in \
         server.advertised_listeners with the address clients should use"
    )]
    Unadvertisable {
        /// The listener.
        listener: ListenerName,
        /// The bind address.
        addr: SocketAddr,
    },
    /// An advertised host is empty or an unspecified address, or its port is 0.
    #[error(
        "server.advertised_listeners: {listener} advertises `{host}:{port}`, which clients \
         cannot connect to"
    )]
    BadAdvertised {
        /// The listener.
        listener: ListenerName,
        /// The host.
        host: String,
        /// The port.
        port: u16,
    },
    /// `listen`/`advertised_host` and `listeners` are both set.
    #[error(
        "server.listen (`--listen`) and server.advertised_host are the shorthand for one \
         PLAINTEXT listener: with server.listeners set, give every listener there (and its \
         address for clients in server.advertised_listeners)"
    )]
    ShorthandConflict,
    /// A TLS listener lacks a required TLS setting.
    #[error(
        "listener {listener} ({protocol}) needs {key}: set it in [server.ssl] or \
         [server.listener_ssl.{listener}]"
    )]
    MissingSsl {
        /// The listener.
        listener: ListenerName,
        /// Its protocol.
        protocol: SecurityProtocol,
        /// The missing key (`certificate_chain`, `private_key`, `client_ca`).
        key: &'static str,
    },
    /// `[server.listener_ssl.<NAME>]` for a listener that is not a TLS one, or none.
    #[error("server.listener_ssl.{name}: {why}")]
    StraySsl {
        /// The table's name.
        name: String,
        /// What is wrong.
        why: String,
    },
    /// `ssl.enabled_protocols` names something other than TLSv1.2 and TLSv1.3.
    #[error(
        "{table}.enabled_protocols: `{value}`: only TLSv1.2 and TLSv1.3 are served (at least one)"
    )]
    Protocols {
        /// `server.ssl` or `server.listener_ssl.<NAME>`.
        table: String,
        /// The value.
        value: String,
    },
    /// `ssl.principal_mapping_rules` does not parse.
    #[error("{table}.principal_mapping_rules: {error}")]
    Rules {
        /// `server.ssl` or `server.listener_ssl.<NAME>`.
        table: String,
        /// The rule error.
        error: crate::server::principal::RuleError,
    },
}

/// The TLS protocol versions `ssl.enabled_protocols` may name (Kafka's names).
pub const TLS_VERSIONS: [&str; 2] = ["TLSv1.3", "TLSv1.2"];

/// The listeners of `server`: `listeners` with `advertised_listeners` and the protocol
/// map applied, or, without `listeners`, the one PLAINTEXT listener of `listen` and
/// `advertised_host`.
pub fn resolve(server: &ServerConfig) -> Result<Vec<ListenerSpec>, ListenerError> {
    let map = protocol_map(&server.listener_security_protocol_map)?;
    if server.listeners.is_empty() {
        if let Some(name) = server.listener_ssl.keys().next() {
            return Err(ListenerError::StraySsl {
                name: name.clone(),
                why: "server.listeners is not set: the one listener of server.listen is \
                      PLAINTEXT"
                    .into(),
            });
        }
        if !server.advertised_listeners.is_empty() {
            return Err(ListenerError::ShorthandConflict);
        }
        let name = ListenerName::plaintext();
        let spec = ListenerSpec {
            name: name.clone(),
            protocol: SecurityProtocol::Plaintext,
            bind: server.listen,
            advertised_host: server.advertised_host.clone(),
            advertised_port: None,
            ssl: None,
        };
        if spec.bind.ip().is_unspecified() && spec.advertised_host.is_none() {
            return Err(ListenerError::Unadvertisable {
                listener: name,
                addr: spec.bind,
            });
        }
        return Ok(vec![spec]);
    }
    if server.listen != ServerConfig::default().listen || server.advertised_host.is_some() {
        return Err(ListenerError::ShorthandConflict);
    }
    let listeners = parse_list("listeners", &server.listeners)?;
    let advertised = parse_list("advertised_listeners", &server.advertised_listeners)?;
    let names: BTreeSet<&ListenerName> = listeners.iter().map(|l| &l.name).collect();
    if let Some(a) = advertised.iter().find(|a| !names.contains(&a.name)) {
        return Err(ListenerError::UnknownAdvertised {
            listener: a.name.clone(),
        });
    }
    for name in server.listener_ssl.keys() {
        if !listeners
            .iter()
            .any(|l| l.name.as_str().eq_ignore_ascii_case(name))
        {
            return Err(ListenerError::StraySsl {
                name: name.clone(),
                why: "no listener of server.listeners has this name".into(),
            });
        }
    }
    let mut specs: Vec<ListenerSpec> = Vec::with_capacity(listeners.len());
    for l in &listeners {
        let protocol = match &map {
            Some(map) => map.get(&l.name).copied(),
            None => SecurityProtocol::from_name(l.name.as_str()),
        }
        .ok_or_else(|| ListenerError::NoProtocol {
            listener: l.name.clone(),
        })?;
        let ip: IpAddr = if l.host.is_empty() {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        } else {
            l.host.parse().map_err(|_| ListenerError::BindHost {
                listener: l.name.clone(),
                host: l.host.clone(),
            })?
        };
        let bind = SocketAddr::new(ip, l.port);
        if let Some(other) = specs.iter().find(|s| s.bind == bind && bind.port() != 0) {
            return Err(ListenerError::DuplicateAddress {
                first: other.name.clone(),
                second: l.name.clone(),
                addr: bind,
            });
        }
        let (advertised_host, advertised_port) = match advertised.iter().find(|a| a.name == l.name)
        {
            Some(a) => {
                let unusable = a.host.is_empty()
                    || a.port == 0
                    || a.host.parse::<IpAddr>().is_ok_and(|ip| ip.is_unspecified());
                if unusable {
                    return Err(ListenerError::BadAdvertised {
                        listener: l.name.clone(),
                        host: a.host.clone(),
                        port: a.port,
                    });
                }
                (Some(a.host.clone()), Some(a.port))
            }
            None if ip.is_unspecified() => {
                return Err(ListenerError::Unadvertisable {
                    listener: l.name.clone(),
                    addr: bind,
                })
            }
            None => (None, None),
        };
        let ssl = ssl_for(server, &l.name, protocol)?;
        specs.push(ListenerSpec {
            name: l.name.clone(),
            protocol,
            bind,
            advertised_host,
            advertised_port,
            ssl,
        });
    }
    Ok(specs)
}

/// The protocol map, normalised; `None` when not set (Kafka's default then: each
/// protocol's name maps to itself).
fn protocol_map(
    raw: &BTreeMap<String, String>,
) -> Result<Option<BTreeMap<ListenerName, SecurityProtocol>>, ListenerError> {
    if raw.is_empty() {
        return Ok(None);
    }
    raw.iter()
        .map(|(key, value)| {
            let bad = || ListenerError::BadProtocolMapEntry {
                key: key.clone(),
                value: value.clone(),
            };
            let name = ListenerName::new(key.trim()).ok_or_else(bad)?;
            let protocol = SecurityProtocol::from_name(value).ok_or_else(bad)?;
            Ok((name, protocol))
        })
        .collect::<Result<BTreeMap<_, _>, _>>()
        .map(Some)
}

fn parse_list(key: &'static str, list: &[String]) -> Result<Vec<EndpointString>, ListenerError> {
    let mut out: Vec<EndpointString> = Vec::with_capacity(list.len());
    for text in list {
        let e = EndpointString::parse(key, text)?;
        if out.iter().any(|o| o.name == e.name) {
            return Err(ListenerError::DuplicateName { key, name: e.name });
        }
        out.push(e);
    }
    Ok(out)
}

/// The effective TLS settings of listener `name`, checked; `None` for a listener
/// without TLS (which must have no `listener_ssl` table).
fn ssl_for(
    server: &ServerConfig,
    name: &ListenerName,
    protocol: SecurityProtocol,
) -> Result<Option<SslSection>, ListenerError> {
    let own = server
        .listener_ssl
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name.as_str()));
    if !protocol.uses_tls() {
        if let Some((k, _)) = own {
            return Err(ListenerError::StraySsl {
                name: k.clone(),
                why: format!("listener {name} is {protocol}, which has no TLS"),
            });
        }
        return Ok(None);
    }
    let (table, ssl) = match own {
        Some((k, ssl)) => (format!("server.listener_ssl.{k}"), ssl),
        None => ("server.ssl".to_owned(), &server.ssl),
    };
    let missing = |key| ListenerError::MissingSsl {
        listener: name.clone(),
        protocol,
        key,
    };
    if ssl.certificate_chain.is_none() {
        return Err(missing("certificate_chain"));
    }
    if ssl.private_key.is_none() {
        return Err(missing("private_key"));
    }
    if ssl.client_auth != crate::config::ClientAuth::None && ssl.client_ca.is_none() {
        return Err(missing("client_ca (client_auth is not `none`)"));
    }
    let protocols_ok = !ssl.enabled_protocols.is_empty()
        && ssl
            .enabled_protocols
            .iter()
            .all(|p| TLS_VERSIONS.contains(&p.as_str()));
    if !protocols_ok {
        return Err(ListenerError::Protocols {
            table,
            value: ssl.enabled_protocols.join(","),
        });
    }
    crate::server::principal::PrincipalMapper::parse(&ssl.principal_mapping_rules)
        .map_err(|error| ListenerError::Rules { table, error })?;
    Ok(Some(ssl.clone()))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use proptest::prelude::*;

    use super::*;
    use crate::config::{ClientAuth, Config};

    fn server(text: &str) -> ServerConfig {
        let config: Config = toml::from_str(&format!("[server]\n{text}")).unwrap();
        config.server
    }

    fn err(text: &str) -> String {
        resolve(&server(text)).unwrap_err().to_string()
    }

    const TLS: &str = "[server.ssl]\ncertificate_chain = 'c.pem'\nprivate_key = 'k.pem'\n";

    #[test]
    fn the_shorthand_is_one_plaintext_listener() {
        let specs = resolve(&ServerConfig::default()).unwrap();
        assert_eq!(specs.len(), 1);
        let s = &specs[0];
        assert_eq!(s.name.as_str(), "PLAINTEXT");
        assert_eq!(s.protocol, SecurityProtocol::Plaintext);
        assert_eq!(s.bind, "127.0.0.1:9092".parse().unwrap());
        assert_eq!(
            (s.advertised_host.as_deref(), s.advertised_port),
            (None, None)
        );
        assert!(s.ssl.is_none());
        let specs = resolve(&server(
            "listen = '0.0.0.0:9000'\nadvertised_host = 'broker.example'\n",
        ))
        .unwrap();
        assert_eq!(specs[0].advertised_host.as_deref(), Some("broker.example"));
        assert!(err("listen = '0.0.0.0:9000'\n").contains("server.advertised_listeners"));
    }

    #[test]
    fn listeners_take_their_protocol_from_the_map_or_their_name() {
        let specs = resolve(&server(&format!(
            "listeners = ['PLAINTEXT://127.0.0.1:9092', 'ssl://127.0.0.1:9093', \
             'INTERNAL://[::1]:9094', 'EXTERNAL://:9095']\n\
             advertised_listeners = ['EXTERNAL://kafka.example.com:443']\n\
             listener_security_protocol_map = {{ PLAINTEXT = 'PLAINTEXT', SSL = 'SSL', \
             internal = 'plaintext', EXTERNAL = 'SSL' }}\n{TLS}"
        )))
        .unwrap();
        let got: Vec<(&str, SecurityProtocol, String)> = specs
            .iter()
            .map(|s| (s.name.as_str(), s.protocol, s.bind.to_string()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "PLAINTEXT",
                    SecurityProtocol::Plaintext,
                    "127.0.0.1:9092".into()
                ),
                ("SSL", SecurityProtocol::Ssl, "127.0.0.1:9093".into()),
                ("INTERNAL", SecurityProtocol::Plaintext, "[::1]:9094".into()),
                ("EXTERNAL", SecurityProtocol::Ssl, "0.0.0.0:9095".into()),
            ]
        );
        assert_eq!(
            specs[3].advertised_host.as_deref(),
            Some("kafka.example.com")
        );
        assert_eq!(specs[3].advertised_port, Some(443));
        assert!(specs[1].ssl.is_some() && specs[3].ssl.is_some());
        assert!(specs[0].ssl.is_none() && specs[2].ssl.is_none());
    }

    #[test]
    fn a_listener_table_overrides_the_shared_tls_settings() {
        let specs = resolve(&server(&format!(
            "listeners = ['SSL://127.0.0.1:9093', 'MTLS://127.0.0.1:9094']\n\
             listener_security_protocol_map = {{ SSL = 'SSL', MTLS = 'SSL' }}\n{TLS}\
             [server.listener_ssl.mtls]\ncertificate_chain = 'c.pem'\nprivate_key = 'k.pem'\n\
             client_auth = 'required'\nclient_ca = 'ca.pem'\n\
             principal_mapping_rules = 'RULE:^CN=(.*?),.*$/$1/L,DEFAULT'\n"
        )))
        .unwrap();
        assert_eq!(specs[0].ssl.as_ref().unwrap().client_auth, ClientAuth::None);
        let mtls = specs[1].ssl.as_ref().unwrap();
        assert_eq!(mtls.client_auth, ClientAuth::Required);
        assert_eq!(mtls.client_ca, Some(PathBuf::from("ca.pem")));
    }

    #[test]
    fn errors_name_the_key_and_the_listener() {
        for (text, wanted) in [
            ("listeners = ['PLAINTEXT:/127.0.0.1:9092']\n", "expected NAME://HOST:PORT"),
            ("listeners = ['PLAIN TEXT://127.0.0.1:9092']\n", "listener name"),
            ("listeners = ['PLAINTEXT://127.0.0.1']\n", "`:PORT`"),
            ("listeners = ['PLAINTEXT://127.0.0.1:99999']\n", "port"),
            ("listeners = ['PLAINTEXT://::1:9092']\n", "brackets"),
            ("listeners = ['PLAINTEXT://[::1:9092']\n", "`]`"),
            (
                "listeners = ['PLAINTEXT://127.0.0.1:1', 'plaintext://127.0.0.1:2']\n",
                "listener PLAINTEXT is named twice",
            ),
            (
                "listeners = ['PLAINTEXT://127.0.0.1:1', 'INTERNAL://127.0.0.1:1']\n\
                 listener_security_protocol_map = { PLAINTEXT = 'PLAINTEXT', INTERNAL = 'PLAINTEXT' }\n",
                "both bind 127.0.0.1:1",
            ),
            ("listeners = ['INTERNAL://127.0.0.1:1']\n", "listener INTERNAL: no security protocol"),
            (
                "listeners = ['PLAINTEXT://127.0.0.1:1']\n\
                 listener_security_protocol_map = { INTERNAL = 'PLAINTEXT' }\n",
                "listener PLAINTEXT: no security protocol",
            ),
            (
                "listeners = ['A://127.0.0.1:1']\nlistener_security_protocol_map = { A = 'TLS' }\n",
                "`A = \"TLS\"`",
            ),
            ("listeners = ['PLAINTEXT://localhost:1']\n", "not an IP address"),
            ("listeners = ['PLAINTEXT://0.0.0.0:1']\n", "listener PLAINTEXT binds 0.0.0.0:1"),
            (
                "listeners = ['PLAINTEXT://127.0.0.1:1']\n\
                 advertised_listeners = ['SSL://h:1']\n",
                "SSL is not one of server.listeners",
            ),
            (
                "listeners = ['PLAINTEXT://:1']\nadvertised_listeners = ['PLAINTEXT://0.0.0.0:1']\n",
                "advertises `0.0.0.0:1`",
            ),
            (
                "listeners = ['PLAINTEXT://127.0.0.1:1']\nadvertised_listeners = ['PLAINTEXT://h:0']\n",
                "advertises `h:0`",
            ),
            (
                "listen = '127.0.0.1:9000'\nlisteners = ['PLAINTEXT://127.0.0.1:1']\n",
                "shorthand",
            ),
            (
                "advertised_host = 'h'\nlisteners = ['PLAINTEXT://127.0.0.1:1']\n",
                "shorthand",
            ),
            ("advertised_listeners = ['PLAINTEXT://h:1']\n", "shorthand"),
            ("listeners = ['SSL://127.0.0.1:1']\n", "listener SSL (SSL) needs certificate_chain"),
            (
                "listeners = ['SSL://127.0.0.1:1']\n[server.ssl]\ncertificate_chain = 'c'\n",
                "needs private_key",
            ),
            (
                "listeners = ['SSL://127.0.0.1:1']\n[server.ssl]\ncertificate_chain = 'c'\n\
                 private_key = 'k'\nclient_auth = 'required'\n",
                "needs client_ca",
            ),
            (
                "listeners = ['SSL://127.0.0.1:1']\n[server.ssl]\ncertificate_chain = 'c'\n\
                 private_key = 'k'\nenabled_protocols = ['TLSv1.1']\n",
                "server.ssl.enabled_protocols: `TLSv1.1`",
            ),
            (
                "listeners = ['SSL://127.0.0.1:1']\n[server.ssl]\ncertificate_chain = 'c'\n\
                 private_key = 'k'\nprincipal_mapping_rules = 'RULE:a/b/X'\n",
                "server.ssl.principal_mapping_rules",
            ),
            (
                "listeners = ['PLAINTEXT://127.0.0.1:1']\n[server.listener_ssl.PLAINTEXT]\n",
                "listener PLAINTEXT is PLAINTEXT, which has no TLS",
            ),
            (
                "listeners = ['PLAINTEXT://127.0.0.1:1']\n[server.listener_ssl.OTHER]\n",
                "server.listener_ssl.OTHER: no listener",
            ),
            ("[server.listener_ssl.OTHER]\n", "server.listeners is not set"),
            (
                "listeners = ['SASL_SSL://127.0.0.1:1']\n",
                "certificate_chain",
            ),
            (
                "listeners = ['CLIENTS://127.0.0.1:2']\n\
                 listener_security_protocol_map = { CLIENTS = 'SASL_PLAINTEXT' }\n\
                 [server.listener_ssl.CLIENTS]\n",
                "listener CLIENTS is SASL_PLAINTEXT, which has no TLS",
            ),
        ] {
            let e = err(text);
            assert!(e.contains(wanted), "{text}\n → {e}\n (wanted {wanted:?})");
        }
    }

    #[test]
    fn sasl_listeners_resolve() {
        let specs = resolve(&server("listeners = ['SASL_PLAINTEXT://127.0.0.1:1']\n")).unwrap();
        assert_eq!(specs[0].protocol, SecurityProtocol::SaslPlaintext);
        assert!(specs[0].ssl.is_none());
        let specs = resolve(&server(&format!(
            "listeners = ['SASL_SSL://127.0.0.1:1']\n{TLS}"
        )))
        .unwrap();
        assert_eq!(specs[0].protocol, SecurityProtocol::SaslSsl);
        assert!(specs[0].ssl.is_some());
    }

    #[test]
    fn port_zero_may_repeat() {
        let specs = resolve(&server(
            "listeners = ['PLAINTEXT://127.0.0.1:0', 'INTERNAL://127.0.0.1:0']\n\
             listener_security_protocol_map = { PLAINTEXT = 'PLAINTEXT', INTERNAL = 'PLAINTEXT' }\n",
        ))
        .unwrap();
        assert_eq!(specs.len(), 2);
    }

    fn host() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z][a-z0-9-]{0,20}(\\.[a-z][a-z0-9-]{0,10}){0,3}",
            any::<[u8; 4]>().prop_map(|b| std::net::Ipv4Addr::from(b).to_string()),
            any::<[u16; 8]>().prop_map(|b| std::net::Ipv6Addr::from(b).to_string()),
            Just(String::new()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 500, failure_persistence: None, ..ProptestConfig::default() })]

        /// Every endpoint prints as it parses, and back.
        #[test]
        fn endpoints_round_trip(name in "[A-Za-z0-9_-]{1,20}", host in host(), port in any::<u16>()) {
            let e = EndpointString { name: ListenerName::new(&name).unwrap(), host, port };
            let text = e.to_string();
            prop_assert_eq!(EndpointString::parse("listeners", &text).unwrap(), e);
        }

        /// Nothing panics on any text.
        #[test]
        fn any_text_parses_or_is_refused(text in ".{0,40}") {
            let _ = EndpointString::parse("listeners", &text);
        }
    }
}
