//! `drover admin users`: SCRAM credentials from the command line (KIP-554), either
//!
//! - **offline, on a data directory** (`--data-dir`): edits
//!   `<data_dir>/scram_credentials.json` of a stopped standalone broker — how the first
//!   credential is made before any listener requires SASL. Refused while a broker runs
//!   on the directory (it holds the credential lock, `auth::file_store`); or
//! - **through a broker** (`--bootstrap HOST:PORT`): AlterUserScramCredentials and
//!   DescribeUserScramCredentials, as Kafka's `kafka-configs.sh --entity-type users`
//!   sends them — standalone or in cluster mode (the broker writes ZooKeeper, every
//!   broker follows). Plain TCP: the listener must not require SASL or TLS (a PLAINTEXT
//!   listener, e.g. one on loopback kept for administration).
//!
//! Either way the same rules apply ([`drover_host::auth::kip554`]) and the password is
//! read from a file (`--password-file`, its first line) or standard input (a prompt
//! without echo on a terminal, else the first line), never from the command line; it
//! is salted here (32 random bytes, PBKDF2) and only the salted password leaves this
//! process (through a broker) or only the derived keys are written (offline).

use std::{
    io::{BufRead, Read, Write},
    net::{TcpStream, ToSocketAddrs},
    path::{Path, PathBuf},
    time::Duration,
};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use drover_host::auth::{
    file_store::FileStore,
    kip554,
    mechanism::{ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS},
};
use kafka_protocol::{
    messages::{
        alter_user_scram_credentials_request::{ScramCredentialDeletion, ScramCredentialUpsertion},
        describe_user_scram_credentials_request::UserName,
        AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey,
        DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse, RequestHeader,
        ResponseHeader,
    },
    protocol::{Decodable, Encodable, StrBytes},
};

/// Longest password accepted, bytes.
const MAX_PASSWORD_BYTES: usize = 1024;

/// Where the credentials are.
#[derive(Debug, Clone)]
pub enum Target {
    /// A stopped broker's data directory.
    DataDir(PathBuf),
    /// A running broker's Kafka listener.
    Broker(String),
}

/// What to do.
#[derive(Debug, Clone)]
pub enum Action {
    /// Add or replace `user`'s credential for `mechanism`.
    Add {
        /// The user.
        user: String,
        /// The mechanism.
        mechanism: ScramMechanism,
        /// PBKDF2 iterations.
        iterations: i32,
        /// The password file; standard input when `None`.
        password_file: Option<PathBuf>,
    },
    /// Remove `user`'s credential for `mechanism`.
    Delete {
        /// The user.
        user: String,
        /// The mechanism.
        mechanism: ScramMechanism,
    },
    /// List users (all when `users` is empty) with their mechanisms and iterations.
    List {
        /// The users.
        users: Vec<String>,
    },
}

/// Parses a mechanism name given on the command line.
pub fn parse_mechanism(name: &str) -> Result<ScramMechanism, String> {
    ScramMechanism::from_name(&name.to_ascii_uppercase())
        .ok_or_else(|| format!("unknown mechanism `{name}`: SCRAM-SHA-256 or SCRAM-SHA-512"))
}

/// Runs `drover admin users ...`.
pub fn run(target: Target, action: Action) -> Result<(), String> {
    if let (Target::DataDir(dir), Action::List { .. } | Action::Delete { .. }) = (&target, &action)
    {
        // Only `add` may start a data directory (the first credential before the first
        // start); a mistyped path is not made into one.
        if !dir.is_dir() {
            return Err(format!("no data directory at {}", dir.display()));
        }
    }
    match action {
        Action::Add {
            user,
            mechanism,
            iterations,
            password_file,
        } => {
            if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
                return Err(format!(
                    "--iterations {iterations}: must be {MIN_ITERATIONS} to {MAX_ITERATIONS} (KIP-554)"
                ));
            }
            let password = read_password(&user, password_file.as_deref())?;
            let mut salt = [0u8; 32];
            getrandom::getrandom(&mut salt).map_err(|e| format!("no random bytes: {e}"))?;
            let salted = drover_host::auth::keys::salted_password(
                mechanism,
                &password,
                &salt,
                iterations as u32,
            );
            drop(password);
            let mut upsertion = ScramCredentialUpsertion::default();
            upsertion.name = StrBytes::from_string(user.clone());
            upsertion.mechanism = mechanism.type_id();
            upsertion.iterations = iterations;
            upsertion.salt = Bytes::copy_from_slice(&salt);
            upsertion.salted_password = Bytes::from(salted);
            let mut request = AlterUserScramCredentialsRequest::default();
            request.upsertions = vec![upsertion];
            let response = alter(&target, request)?;
            report_alter(&response)?;
            println!("{user}: {mechanism} credential set ({iterations} iterations)");
            Ok(())
        }
        Action::Delete { user, mechanism } => {
            let mut deletion = ScramCredentialDeletion::default();
            deletion.name = StrBytes::from_string(user.clone());
            deletion.mechanism = mechanism.type_id();
            let mut request = AlterUserScramCredentialsRequest::default();
            request.deletions = vec![deletion];
            report_alter(&alter(&target, request)?)?;
            println!("{user}: {mechanism} credential deleted");
            Ok(())
        }
        Action::List { users } => {
            let mut request = DescribeUserScramCredentialsRequest::default();
            request.users = (!users.is_empty()).then(|| {
                users
                    .iter()
                    .map(|u| {
                        let mut name = UserName::default();
                        name.name = StrBytes::from_string(u.clone());
                        name
                    })
                    .collect()
            });
            let response = describe(&target, request)?;
            if response.error_code != 0 {
                return Err(format!(
                    "error {}: {}",
                    response.error_code,
                    response.error_message.as_deref().unwrap_or("")
                ));
            }
            let mut failed = false;
            for r in &response.results {
                if r.error_code != 0 {
                    failed = true;
                    eprintln!(
                        "{}: error {}: {}",
                        r.user,
                        r.error_code,
                        r.error_message.as_deref().unwrap_or("")
                    );
                    continue;
                }
                let infos: Vec<String> = r
                    .credential_infos
                    .iter()
                    .map(|i| {
                        let name = ScramMechanism::from_type_id(i.mechanism).map_or_else(
                            || format!("mechanism {}", i.mechanism),
                            |m| m.name().to_owned(),
                        );
                        format!("{name} iterations={}", i.iterations)
                    })
                    .collect();
                println!("{} {}", r.user, infos.join(" "));
            }
            if failed {
                Err("some users could not be described".into())
            } else {
                Ok(())
            }
        }
    }
}

fn report_alter(response: &AlterUserScramCredentialsResponse) -> Result<(), String> {
    for r in &response.results {
        if r.error_code != 0 {
            return Err(format!(
                "{}: refused (error {}): {}",
                r.user,
                r.error_code,
                r.error_message.as_deref().unwrap_or("")
            ));
        }
    }
    Ok(())
}

fn alter(
    target: &Target,
    request: AlterUserScramCredentialsRequest,
) -> Result<AlterUserScramCredentialsResponse, String> {
    match target {
        Target::DataDir(dir) => {
            let (store, table) = FileStore::open(dir).map_err(|e| e.to_string())?;
            let altered = kip554::alter(&table, &request, usize::MAX);
            if let Some(next) = &altered.table {
                store.write(next).map_err(|e| e.to_string())?;
            }
            Ok(altered.response)
        }
        Target::Broker(addr) => {
            let body = call(addr, ApiKey::AlterUserScramCredentials, 0, &request)?;
            AlterUserScramCredentialsResponse::decode(&mut body.clone(), 0)
                .map_err(|e| format!("{addr}: bad AlterUserScramCredentials answer: {e}"))
        }
    }
}

fn describe(
    target: &Target,
    request: DescribeUserScramCredentialsRequest,
) -> Result<DescribeUserScramCredentialsResponse, String> {
    match target {
        Target::DataDir(dir) => {
            let (_store, table) = FileStore::open(dir).map_err(|e| e.to_string())?;
            Ok(kip554::describe(&table, &request))
        }
        Target::Broker(addr) => {
            let body = call(addr, ApiKey::DescribeUserScramCredentials, 0, &request)?;
            DescribeUserScramCredentialsResponse::decode(&mut body.clone(), 0)
                .map_err(|e| format!("{addr}: bad DescribeUserScramCredentials answer: {e}"))
        }
    }
}

/// One request to the Kafka listener at `addr`; returns the response body.
pub fn call(addr: &str, key: ApiKey, version: i16, body: &impl Encodable) -> Result<Bytes, String> {
    let err = |e: std::io::Error| format!("broker at {addr}: {e}");
    let socket = addr
        .to_socket_addrs()
        .map_err(err)?
        .next()
        .ok_or_else(|| format!("broker at {addr}: no address"))?;
    let mut stream = TcpStream::connect_timeout(&socket, Duration::from_secs(10)).map_err(err)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(err)?;
    let mut header = RequestHeader::default();
    header.request_api_key = key as i16;
    header.request_api_version = version;
    header.correlation_id = 1;
    header.client_id = Some(StrBytes::from_static_str("drover-admin-users"));
    let mut frame = BytesMut::new();
    frame.put_i32(0);
    header
        .encode(&mut frame, key.request_header_version(version))
        .map_err(|e| format!("encoding the request: {e}"))?;
    body.encode(&mut frame, version)
        .map_err(|e| format!("encoding the request: {e}"))?;
    let len = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&len.to_be_bytes());
    stream.write_all(&frame).map_err(err)?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).map_err(|e| {
        format!(
            "broker at {addr}: {e} (a broker before this release, or a listener that requires \
             SASL or TLS, closes the connection)"
        )
    })?;
    let size = i32::from_be_bytes(size);
    if !(0..=16 << 20).contains(&size) {
        return Err(format!("broker at {addr}: a response of {size} bytes"));
    }
    let mut buf = vec![0u8; size as usize];
    stream.read_exact(&mut buf).map_err(err)?;
    let mut buf = Bytes::from(buf);
    ResponseHeader::decode(&mut buf, key.response_header_version(version))
        .map_err(|e| format!("broker at {addr}: bad response header: {e}"))?;
    let rest = buf.remaining();
    Ok(buf.copy_to_bytes(rest))
}

/// The password: the first line of `file`, or of standard input (prompted for twice
/// without echo on a terminal). Never empty, at most 1024 bytes.
fn read_password(user: &str, file: Option<&Path>) -> Result<Vec<u8>, String> {
    let password = match file {
        Some(path) => {
            let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            first_line(&text)
        }
        None if stdin_is_terminal() => {
            let first = prompt(&format!("Password for {user}: "))?;
            let again = prompt("Again: ")?;
            if first != again {
                return Err("the passwords differ".into());
            }
            first
        }
        None => {
            let mut line = Vec::new();
            std::io::stdin()
                .lock()
                .take(MAX_PASSWORD_BYTES as u64 + 2)
                .read_until(b'\n', &mut line)
                .map_err(|e| format!("reading the password from standard input: {e}"))?;
            first_line(&line)
        }
    };
    if password.is_empty() {
        return Err("the password is empty".into());
    }
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(format!(
            "the password is longer than {MAX_PASSWORD_BYTES} bytes"
        ));
    }
    Ok(password)
}

fn first_line(text: &[u8]) -> Vec<u8> {
    let line = text.split(|b| *b == b'\n').next().unwrap_or_default();
    line.strip_suffix(b"\r").unwrap_or(line).to_vec()
}

fn stdin_is_terminal() -> bool {
    // SAFETY: isatty reads a descriptor's state only.
    unsafe { libc::isatty(libc::STDIN_FILENO) == 1 }
}

/// Prompts on standard error and reads a line from the terminal with echo off.
fn prompt(text: &str) -> Result<Vec<u8>, String> {
    eprint!("{text}");
    let _ = std::io::stderr().flush();
    // SAFETY: termios is plain data; tcgetattr fills it for the terminal on stdin.
    let mut saved: libc::termios = unsafe { std::mem::zeroed() };
    let have_terminal = unsafe { libc::tcgetattr(libc::STDIN_FILENO, &mut saved) } == 0;
    if have_terminal {
        let mut quiet = saved;
        quiet.c_lflag &= !libc::ECHO;
        // SAFETY: sets the terminal's attributes from a copy of its own.
        unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &quiet) };
    }
    let mut line = Vec::new();
    let read = std::io::stdin()
        .lock()
        .take(MAX_PASSWORD_BYTES as u64 + 2)
        .read_until(b'\n', &mut line);
    if have_terminal {
        // SAFETY: restores the attributes read above.
        unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &saved) };
    }
    eprintln!();
    read.map_err(|e| format!("reading the password: {e}"))?;
    Ok(first_line(&line))
}

#[cfg(test)]
mod tests {
    use drover_host::auth::credentials::ScramCredential;

    use super::*;

    #[test]
    fn offline_add_list_delete_on_a_data_directory() {
        let dir = tempfile::tempdir().unwrap();
        let pw = dir.path().join("pw");
        std::fs::write(&pw, "s3cret\n").unwrap();
        let target = Target::DataDir(dir.path().join("data"));
        run(
            target.clone(),
            Action::Add {
                user: "alice".into(),
                mechanism: ScramMechanism::Sha512,
                iterations: 8192,
                password_file: Some(pw.clone()),
            },
        )
        .unwrap();
        let (_, table) = FileStore::open(&dir.path().join("data")).unwrap();
        let c = table.get("alice", ScramMechanism::Sha512).unwrap().clone();
        assert_eq!(c.iterations, 8192);
        // The password checks against what was stored.
        let salted = drover_host::auth::keys::salted_password(
            ScramMechanism::Sha512,
            b"s3cret",
            &c.salt,
            8192,
        );
        let expected =
            ScramCredential::from_salted_password(ScramMechanism::Sha512, &c.salt, &salted, 8192);
        assert_eq!(c, expected);
        let text = std::fs::read_to_string(dir.path().join("data/scram_credentials.json")).unwrap();
        assert!(!text.contains("s3cret"));
        run(target.clone(), Action::List { users: vec![] }).unwrap();
        assert!(run(
            target.clone(),
            Action::Add {
                user: "bob".into(),
                mechanism: ScramMechanism::Sha256,
                iterations: 100,
                password_file: Some(pw.clone()),
            },
        )
        .is_err());
        run(
            target.clone(),
            Action::Delete {
                user: "alice".into(),
                mechanism: ScramMechanism::Sha512,
            },
        )
        .unwrap();
        let e = run(
            target,
            Action::Delete {
                user: "alice".into(),
                mechanism: ScramMechanism::Sha512,
            },
        )
        .unwrap_err();
        assert!(e.contains("error 91"), "{e}");
    }

    #[test]
    fn only_add_makes_a_data_directory() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("typo");
        let e = run(
            Target::DataDir(missing.clone()),
            Action::List { users: vec![] },
        )
        .unwrap_err();
        assert!(e.contains("no data directory"), "{e}");
        assert!(!missing.exists());
    }

    #[test]
    fn passwords_are_first_lines() {
        assert_eq!(first_line(b"pw\r\nrest"), b"pw");
        assert_eq!(first_line(b"pw"), b"pw");
        assert_eq!(first_line(b""), b"");
    }
}
