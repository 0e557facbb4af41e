"""Test certificates made with the openssl CLI, shared by the TLS and SASL tests
(test_tls.py, test_sasl.py): two CAs, certificates for the broker and for clients.
Keys live in the test's temp directory only; none is committed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import conftest
from conftest import Broker

OPENSSL = shutil.which("openssl")


def openssl(*args: str, cwd: Path) -> None:
    r = subprocess.run([OPENSSL, *args], cwd=cwd, capture_output=True, timeout=30)
    assert r.returncode == 0, f"openssl {' '.join(args)}: {r.stderr.decode(errors='replace')}"


class Certs:
    """Two CAs, the broker's certificate (SAN localhost and 127.0.0.1) from the first,
    client certificates from either."""

    def __init__(self, d: Path):
        self.dir = d
        d.mkdir(parents=True, exist_ok=True)
        (d / "ext.cnf").write_text(
            "[server]\nsubjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
            "[client]\nextendedKeyUsage=clientAuth\n")
        self.ca = self._ca("ca", "/O=Drover Test/CN=Test CA")
        self.other_ca = self._ca("other-ca", "/O=Elsewhere/CN=Other CA")

    def _ca(self, name: str, subject: str) -> Path:
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
                "-subj", subject, cwd=self.dir)
        return self.dir / f"{name}.pem"

    def issue(self, name: str, subject: str, *, kind: str, ca: str = "ca") -> tuple[Path, Path]:
        """-> (certificate, key) signed by `ca`."""
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=self.dir)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
                "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", "ext.cnf",
                "-extensions", kind, cwd=self.dir)
        os.chmod(self.dir / f"{name}.key", 0o600)
        return self.dir / f"{name}.pem", self.dir / f"{name}.key"


class ConfigListenersBroker(Broker):
    """A broker whose listeners are its config file's (no --listen on the command
    line); subclasses write `config_path`."""

    def command(self) -> list[str]:
        return [str(conftest.drover_bin()), "serve", "--admin-listen",
                f"{self.host}:{self.admin_port}", "--data-dir", str(self.data_dir),
                "--plugin-dir", str(self.plugin_dir), "--config", str(self.config_path)]
