//! `drover admin ...`: the admin HTTP API from the command line (loopback HTTP/1.1, one
//! request per connection).

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    time::Duration,
};

/// Sends one request to the admin API at `addr`; returns the status code and body.
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<(u16, String), String> {
    let err = |e: std::io::Error| format!("admin API at {addr}: {e}");
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(err)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(err)?;
    let body = body.unwrap_or("");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).map_err(err)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).map_err(err)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("admin API at {addr}: malformed response"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("admin API at {addr}: no status line"))?;
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
pub fn get(addr: SocketAddr, path: &str) -> Result<(), String> {
    let (status, body) = http(addr, "GET", path, None)?;
    println!("{body}");
    if status == 200 {
        Ok(())
    } else {
        Err(format!("HTTP {status}"))
    }
}

/// `drover admin transactions partitions [--hanging]`: the transactions open in the
/// broker's partitions, as JSON (`--hanging`: only those nothing will end).
pub fn transactions_in_partitions(addr: SocketAddr, hanging: bool) -> Result<(), String> {
    let (status, body) = http(addr, "GET", "/v1/transactions/partitions", None)?;
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
    addr: SocketAddr,
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
    let (status, answer) = http(addr, "POST", "/v1/transactions/abort", Some(&body))?;
    if status != 200 {
        return Err(format!("abort refused (HTTP {status}): {}", answer.trim()));
    }
    println!("{answer}");
    Ok(())
}

/// `drover admin offset-store status`.
pub fn offset_store_status(addr: SocketAddr) -> Result<(), String> {
    let (status, body) = http(addr, "GET", "/v1/offset-store", None)?;
    println!("{body}");
    if status == 200 {
        Ok(())
    } else {
        Err(format!("HTTP {status}"))
    }
}

/// `drover plugins list --admin`: the plugin directory as the broker at `addr` has it
/// (`GET /v1/plugins`), with each assignor's slow state, as a table or JSON lines.
/// Errors: the broker is unreachable or answers something else than the rows.
pub fn plugins_list(addr: SocketAddr, json: bool) -> Result<(), String> {
    let (status, body) = http(addr, "GET", "/v1/plugins", None)?;
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

/// `drover plugins rescan`: asks the broker at `addr` to rescan its plugin directory and
/// prints the report (`json`: the admin API's answer as is). Errors: the broker is
/// unreachable or the rescan could not run.
pub fn plugins_rescan(addr: SocketAddr, json: bool) -> Result<(), String> {
    let (status, body) = http(addr, "POST", "/v1/plugins/rescan", None)?;
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
    addr: SocketAddr,
    plugin: &str,
    config_text: &str,
    wait: bool,
) -> Result<(), String> {
    let body = serde_json::json!({ "plugin": plugin, "config": config_text }).to_string();
    let (status, answer) = http(addr, "POST", "/v1/offset-store", Some(&body))?;
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
        let (_, body) = http(addr, "GET", "/v1/offset-store", None)?;
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
