"""The admin API's access rules (issue 29 item 6; docs/security.md, "The admin API"):
a non-loopback admin address without TLS and an authentication method refuses to
start; with a token file and TLS, requests without the token or with another are
401, the right one 200; a `text/plain` or form POST is 415 and rescans nothing; a
`Host` header naming something else is 421; `admin.public_read` opens `/metrics`;
`drover admin` and `drover plugins rescan` pass the token file (flag or environment)
and the CA; with mTLS a client certificate from the configured CA authenticates (a
principal outside `admin.principals` is 403) and one from another CA fails the
handshake. Certificates are made here with the openssl CLI (test_tls.Certs); the
token is made per test and never committed."""

from __future__ import annotations

import email.message
import os
import secrets
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import conftest
from conftest import Broker, free_port
from test_admin import parse_metrics
from test_tls import OPENSSL, Certs

pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl CLI is needed")


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    c = Certs(tmp_path_factory.mktemp("admin-certs"))
    c.broker = c.issue("broker", "/O=Drover Test/CN=localhost", kind="server")
    c.ops = c.issue("ops", "/O=Drover Test/CN=ops", kind="client")
    c.dev = c.issue("dev", "/O=Drover Test/CN=dev", kind="client")
    c.mallory = c.issue("mallory", "/O=Elsewhere/CN=ops", kind="client", ca="other-ca")
    return c


def drover(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(conftest.drover_bin()), *args], capture_output=True, text=True,
                          timeout=30, env={**os.environ, **(env or {})})


def request(url: str, *, method: str = "GET", token: str | None = None,
            headers: dict | None = None, body: bytes | None = None,
            context: ssl.SSLContext | None = None) -> tuple[int, "email.message.Message", str]:
    """(status, headers, body) of one request."""
    h = dict(headers or {})
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=body, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode(errors="replace")


def tls_context(certs: Certs, client: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    if client:
        ctx.load_cert_chain(str(client[0]), str(client[1]))
    return ctx


def counters(text: str) -> dict[str, float]:
    """name{labels} -> value, and each family's sum under its bare name."""
    out: dict[str, float] = {}
    for name, labels, value in parse_metrics(text):
        key = name + ("{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"
                      if labels else "")
        out[key] = value
        out[name] = out.get(name, 0) + value if labels else value
    return out


def make_broker(tmp_path: Path, name: str, admin: str) -> Broker:
    return Broker(tmp_path / name, config=admin)


@pytest.fixture
def started(request):
    """start(broker) -> broker, killed (with its log shown on failure) at teardown."""
    made: list[Broker] = []

    def start(b: Broker) -> Broker:
        made.append(b)
        return conftest.start_or_fail(b)

    yield start
    conftest.stop_and_show_logs(request, made, 80)


def test_a_non_loopback_admin_address_without_tls_and_authentication_refuses_to_start(tmp_path):
    token = tmp_path / "token"
    token.write_text(secrets.token_urlsafe(24) + "\n")
    token.chmod(0o600)
    only_token = tmp_path / "only-token.toml"
    only_token.write_text(f'[admin]\ntoken_file = "{token}"\n')
    port = free_port()
    base = ["serve", "--listen", f"127.0.0.1:{free_port()}", "--admin-listen", f"0.0.0.0:{port}",
            "--data-dir", str(tmp_path / "data"), "--plugin-dir", str(tmp_path)]
    for extra, wanted in [([], "not a loopback address"),
                          (["--config", str(only_token)], "needs TLS")]:
        r = drover(*base, *extra)
        assert r.returncode != 0, r.stderr
        assert "server.admin_listen is 0.0.0.0:" in r.stderr and wanted in r.stderr, r.stderr
        assert "drover ready" not in r.stderr
    # A token file others may read stops the start too, without quoting the token.
    token.chmod(0o644)
    r = drover("serve", "--listen", f"127.0.0.1:{free_port()}", "--admin-listen",
               f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data"), "--plugin-dir",
               str(tmp_path), "--config", str(only_token))
    assert r.returncode != 0 and "chmod 600" in r.stderr, r.stderr
    assert token.read_text().strip() not in r.stderr


def test_token_over_tls(tmp_path, certs, started):
    token = secrets.token_urlsafe(24)
    token_file = tmp_path / "admin.token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    b = started(make_broker(tmp_path, "broker", f"""
[admin]
token_file = "{token_file}"
public_read = ["/metrics"]
[admin.ssl]
certificate_chain = "{certs.broker[0]}"
private_key = "{certs.broker[1]}"
"""))
    url = f"https://localhost:{b.admin_port}"
    ctx = tls_context(certs)

    def metrics() -> dict[str, float]:
        status, _, body = request(url + "/metrics", context=ctx)
        assert status == 200, body
        return counters(body)

    # Credentials: none, wrong, right. /metrics is public; /v1/health is not.
    status, headers, body = request(url + "/v1/topics", context=ctx)
    assert status == 401, body
    assert headers.get("WWW-Authenticate", "").startswith("Bearer"), headers
    assert request(url + "/v1/topics", token=token + "x", context=ctx)[0] == 401
    assert request(url + "/v1/topics", token=token[:-1], context=ctx)[0] == 401
    status, _, body = request(url + "/v1/topics", token=token, context=ctx)
    assert status == 200 and body == "[]", body
    assert request(url + "/v1/health", context=ctx)[0] == 401
    assert request(url + "/v1/health", token=token, context=ctx)[0] == 200
    before = metrics()
    assert before.get("drover_admin_requests_refused_total", 0) >= 4, before

    # A cross-site form or text/plain POST rescans nothing, token or not.
    for ctype in ["text/plain", "application/x-www-form-urlencoded"]:
        for tok in [None, token]:
            status, _, body = request(url + "/v1/plugins/rescan", method="POST", token=tok,
                                      headers={"Content-Type": ctype}, body=b"{}", context=ctx)
            assert status == (415 if tok else 401), (ctype, tok is not None, status, body)
    after = metrics()
    assert after.get("drover_plugin_rescans_total", 0) == before.get("drover_plugin_rescans_total", 0)
    assert after['drover_admin_requests_refused_total{reason="content_type"}'] == 2, after

    # A Host header that does not name the listener (DNS rebinding), token or not.
    for tok in [None, token]:
        status, _, body = request(url + "/metrics", token=tok, context=ctx,
                                  headers={"Host": f"rebind.example.com:{b.admin_port}"})
        assert status == 421, body
    assert metrics()['drover_admin_requests_refused_total{reason="host"}'] == 2

    # Plain HTTP to the TLS port gets no answer.
    with socket.create_connection(("127.0.0.1", b.admin_port), timeout=5) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        try:
            assert s.recv(100) == b""
        except ConnectionResetError:
            pass

    # The CLI: the token file by flag or environment, the CA by flag; JSON on mutations.
    admin = ["--admin", url, "--ca-file", str(certs.ca)]
    r = drover("admin", *admin, "--token-file", str(token_file), "offset-store", "status")
    assert r.returncode == 0, r.stderr
    assert '"configured":"embedded"' in r.stdout, r.stdout
    r = drover("plugins", "rescan", *admin, "--format", "json",
               env={"DROVER_ADMIN_TOKEN_FILE": str(token_file)})
    assert r.returncode == 0, r.stderr
    assert '"libraries_loaded"' in r.stdout, r.stdout
    assert metrics()["drover_plugin_rescans_total"] == before.get("drover_plugin_rescans_total", 0) + 1
    r = drover("plugins", "rescan", *admin)
    assert r.returncode == 1 and "HTTP 401" in r.stderr, (r.stdout, r.stderr)
    r = drover("admin", "--admin", f"127.0.0.1:{b.admin_port}", "--token-file", str(token_file),
               "groups")
    assert r.returncode != 0, r.stdout  # plain HTTP to a TLS listener

    # The token never reaches the broker's log.
    assert token not in b.all_logs()


def test_client_certificates(tmp_path, certs, started):
    b = started(make_broker(tmp_path, "broker", f"""
[admin]
principals = ["User:ops"]
[admin.ssl]
certificate_chain = "{certs.broker[0]}"
private_key = "{certs.broker[1]}"
client_auth = "required"
client_ca = "{certs.ca}"
principal_mapping_rules = "RULE:^CN=([^,]*),.*$/$1/, DEFAULT"
"""))
    url = f"https://localhost:{b.admin_port}"
    status, _, body = request(url + "/v1/topics", context=tls_context(certs, certs.ops))
    assert status == 200 and body == "[]", body
    status, _, body = request(url + "/v1/topics", context=tls_context(certs, certs.dev))
    assert status == 403, body
    status, _, body = request(url + "/v1/plugins/rescan", method="POST", body=b"",
                              headers={"Content-Type": "text/plain"},
                              context=tls_context(certs, certs.ops))
    assert status == 415, body
    # Another CA's certificate (with the same CN) and none at all: no handshake.
    for client in [certs.mallory, None]:
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            request(url + "/v1/topics", context=tls_context(certs, client))

    cli = ["--admin", url, "--ca-file", str(certs.ca)]
    r = drover("admin", *cli, "--cert-file", str(certs.ops[0]), "--key-file", str(certs.ops[1]),
               "transactions")
    assert r.returncode == 0, r.stderr
    r = drover("plugins", "rescan", *cli, env={"DROVER_ADMIN_CERT_FILE": str(certs.ops[0]),
                                               "DROVER_ADMIN_KEY_FILE": str(certs.ops[1])})
    assert r.returncode == 0, r.stderr
    r = drover("plugins", "rescan", *cli, "--cert-file", str(certs.mallory[0]), "--key-file",
               str(certs.mallory[1]))
    assert r.returncode == 1, (r.stdout, r.stderr)

    status, _, body = request(url + "/metrics", context=tls_context(certs, certs.ops))
    seen = counters(body)
    assert seen['drover_tls_handshake_failures_total{listener="admin",reason="client_certificate"}'] >= 2
    assert seen['drover_admin_requests_refused_total{reason="forbidden"}'] == 1


def test_the_token_file_is_read_again_at_sighup_and_reload(tmp_path, started):
    """Rotating the token without a restart: the token file is read again at SIGHUP and
    at `POST /v1/tls/reload` (there is no TLS listener here: it reloads the token
    alone). The new token works and the old one stops working; a reload that finds a
    bad file keeps the token in force and says so, naming the file, not a token."""
    import signal
    import time

    tokens = [secrets.token_urlsafe(24) for _ in range(3)]
    token_file = tmp_path / "admin.token"

    def write(text: str) -> None:
        tmp = tmp_path / "admin.token.new"
        tmp.write_text(text)
        tmp.chmod(0o600)
        tmp.rename(token_file)

    write(tokens[0] + "\n")
    b = started(make_broker(tmp_path, "broker", f'[admin]\ntoken_file = "{token_file}"\n'))
    url = f"http://127.0.0.1:{b.admin_port}"

    def works(token: str) -> bool:
        return request(url + "/v1/topics", token=token)[0] == 200

    assert works(tokens[0]) and not works(tokens[1])
    # SIGHUP: the broker keeps running (it does not take SIGHUP's default) and serves
    # the new token.
    write(tokens[1] + "\n")
    assert works(tokens[0])
    b.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while not works(tokens[1]):
        assert time.monotonic() < deadline, "the new token was not read at SIGHUP"
        time.sleep(0.05)
    assert not works(tokens[0])
    b.assert_alive()
    # POST /v1/tls/reload (JSON, authenticated with the token in force).
    write(tokens[2] + "\n")
    status, _, body = request(url + "/v1/tls/reload", method="POST", token=tokens[1],
                              headers={"Content-Type": "application/json"}, body=b"{}")
    assert status == 200 and '"admin_token":{"reloaded":true}' in body, (status, body)
    assert works(tokens[2]) and not works(tokens[1])
    # A bad file (too short a token): 500, naming the file; the token in force stays.
    write("short\n")
    status, _, body = request(url + "/v1/tls/reload", method="POST", token=tokens[2],
                              headers={"Content-Type": "application/json"}, body=b"{}")
    assert status == 500 and str(token_file) in body and "short" not in body, body
    assert works(tokens[2])
    logs = b.all_logs()
    assert "admin token not reloaded" in logs
    for t in tokens:
        assert t not in logs
