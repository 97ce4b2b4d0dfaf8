"""TLS and a service-account token in front of the twin's API, as a pod sees a real API server.

`drills twin up --tls` serves the same API on a second, HTTPS listener whose certificate is signed by a
CA made at start (kept in memory: nothing else can be signed with it), and requires there the bearer
token it wrote. It writes a service-account dir (`token`, `ca.crt`, `namespace`) like the one mounted
in a pod, so a process with KUBERNETES_SERVICE_HOST/PORT pointing at the listener and
DRILLS_SERVICEACCOUNT_DIR at that dir runs the real in-cluster code path. The plain listener stays
open for the twin's own controllers. Keys and the token stay in the twin's state dir (mode 0600).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import secrets
import ssl
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TlsFiles", "make_tls", "server_context", "NAMESPACE"]

NAMESPACE = "gpu-drills"  # the `namespace` file: where a scheduled run's service account lives
_DAYS = 7


@dataclass(frozen=True)
class TlsFiles:
    """Where the certificate, key and service-account files are; `token` is read by the server only."""

    ca: Path
    cert: Path
    key: Path
    serviceaccount_dir: Path
    token: str

    def __repr__(self) -> str:  # never the token
        return f"TlsFiles({self.serviceaccount_dir})"


def make_tls(state_dir: str | Path, host: str = "127.0.0.1") -> TlsFiles:
    """A fresh CA, a server certificate for `host` (and localhost), and a service-account dir."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    state = Path(state_dir)
    tls_dir, sa_dir = state / "tls", state / "serviceaccount"
    for folder in (tls_dir, sa_dir):
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o700)
    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpu-drills twin CA")])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=_DAYS))
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, encipher_only=False,
                                            decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.DNSName("kubernetes.default.svc")]
    try:
        names.append(x509.IPAddress(ipaddress.ip_address(host)))
    except ValueError:
        names.append(x509.DNSName(host))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=_DAYS))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    files = TlsFiles(ca=tls_dir / "ca.crt", cert=tls_dir / "server.crt", key=tls_dir / "server.key",
                     serviceaccount_dir=sa_dir, token=secrets.token_urlsafe(32))
    _write(files.ca, ca_pem)
    _write(files.cert, cert.public_bytes(serialization.Encoding.PEM))
    _write(files.key, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()), private=True)
    _write(sa_dir / "ca.crt", ca_pem)
    _write(sa_dir / "token", files.token.encode(), private=True)
    _write(sa_dir / "namespace", NAMESPACE.encode())
    return files


def server_context(files: TlsFiles) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(files.cert, files.key)
    return ctx


def _write(path: Path, data: bytes, private: bool = False) -> None:
    path.unlink(missing_ok=True)
    path.touch(mode=0o600 if private else 0o644)
    path.write_bytes(data)
