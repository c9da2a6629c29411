"""The Elasticsearch clients verify an https server against the CA their settings name (ECK's
self-signed CA on Kubernetes), and refuse a server their CAs did not sign: passwords never go to
a server that is not the one configured, and never in clear."""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from elastic_transport import TlsError
from elasticsearch import Elasticsearch

from log_pipeline.outputs.elasticsearch import make_client
from log_pipeline.settings import ShipperSettings

INFO = {"name": "tls", "cluster_name": "tls", "version": {"number": "9.2.1"}, "tagline": "x"}


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _pki(tmp: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for 127.0.0.1 signed by it, as ECK's self-signed CA does."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
             "-keyout", "ca.key", "-out", "ca.crt", cwd=tmp)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
             "-keyout", "tls.key", "-out", "tls.csr", cwd=tmp)  # fmt: skip
    (tmp / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "tls.crt",
             cwd=tmp)  # fmt: skip
    return tmp / "ca.crt", tmp / "tls.crt", tmp / "tls.key"


class _Info(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        body = json.dumps(INFO).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Elastic-Product", "Elasticsearch")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def https_es(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(https URL, CA file) of a server answering Elasticsearch's info call over TLS."""
    if not _has_openssl():
        pytest.skip("no openssl binary to make the test certificates")
    ca, cert, key = _pki(tmp_path_factory.mktemp("pki"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Info)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", ca
    finally:
        server.shutdown()
        server.server_close()


def _has_openssl() -> bool:
    try:
        subprocess.run(["openssl", "version"], check=True, capture_output=True, timeout=10)
    except (OSError, subprocess.CalledProcessError):
        return False
    return True


def _client(url: str, ca: str) -> Elasticsearch:
    settings = ShipperSettings(outputs=["elasticsearch"], es_url=url, es_username="shipper",
                               es_password="pw", es_ca_file=ca)  # fmt: skip
    return make_client(settings.es_url, settings.es_auth(), 5.0)


def test_the_shipper_verifies_elasticsearch_against_the_ca_it_is_given(
    https_es: tuple[str, Path],
) -> None:
    url, ca = https_es
    client = _client(url, str(ca))
    assert client.info()["version"]["number"] == "9.2.1"


def test_a_server_its_cas_did_not_sign_is_refused(https_es: tuple[str, Path]) -> None:
    url, _ = https_es
    client = _client(url, "")  # the system's CAs: they never signed ECK's
    with pytest.raises(TlsError) as refused:
        client.info()
    assert "CERTIFICATE_VERIFY_FAILED" in repr(refused.value)


def test_the_ca_setting_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKENPULSE_SHIPPER_ES_CA_FILE", "/es-ca/ca.crt")
    settings = ShipperSettings(outputs=["elasticsearch"], es_url="https://tokenpulse-es-http:9200")
    assert settings.es_auth().client_kwargs() == {"ca_certs": "/es-ca/ca.crt"}
