//! TLS (research note §2.3, Table 2 "TLS"): a certificate made with rcgen, `rediss://`
//! clients (tokio-rustls, and Debian's redis-cli, which is built with TLS), plaintext on the
//! TLS port, and a client that does not trust the certificate.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use sluice::{Config, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;

use crate::support::{Conn, free_port};

/// A self-signed certificate for "localhost" and 127.0.0.1, written to a temp directory.
struct TestCert {
    dir: PathBuf,
    cert_pem: String,
}

impl TestCert {
    fn new(name: &str) -> TestCert {
        let rcgen::CertifiedKey { cert, signing_key } =
            rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
                .unwrap();
        let dir = std::env::temp_dir().join(format!("sluice-tls-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
        std::fs::write(dir.join("key.pem"), signing_key.serialize_pem()).unwrap();
        TestCert {
            dir,
            cert_pem: cert.pem(),
        }
    }

    fn path(&self, file: &str) -> String {
        self.dir.join(file).to_string_lossy().into_owned()
    }
}

impl Drop for TestCert {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn tls_server(cert: &TestCert) -> TestServer {
    // `free_port` only finds a port free at that moment: another test's server may take it
    // before this one binds, so a port in use is tried again with another.
    let mut last = None;
    for _ in 0..5 {
        match TestServer::start_with(Config {
            test_mode: true,
            tls_port: free_port(),
            tls_cert_file: Some(cert.path("cert.pem")),
            tls_key_file: Some(cert.path("key.pem")),
            ..Config::default()
        }) {
            Ok(server) => return server,
            Err(e) if e.to_string().contains("Address already in use") => last = Some(e),
            Err(e) => panic!("{e}"),
        }
    }
    panic!("no free TLS port: {last:?}")
}

/// Sends `request` over TLS, trusting only `trusted_pem`, and reads until `want` bytes came.
async fn tls_exchange(
    addr: SocketAddr,
    trusted_pem: &str,
    request: &[u8],
    want: usize,
) -> std::io::Result<Vec<u8>> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(trusted_pem.as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await?;
    tls.write_all(request).await?;
    tls.flush().await?;
    let mut got = vec![0u8; want];
    tls.read_exact(&mut got).await?;
    Ok(got)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Table 2 "TLS": a TLS client that trusts the certificate runs commands; the plain port
/// keeps working and sees the same data.
#[test]
fn tls_clients_run_commands() {
    let cert = TestCert::new("cmds");
    let server = tls_server(&cert);
    let tls_addr = server.tls_addr().expect("TLS listener");
    let rt = runtime();
    let got = rt
        .block_on(tls_exchange(
            tls_addr,
            &cert.cert_pem,
            b"*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\ntls\r\n",
            12,
        ))
        .unwrap();
    assert_eq!(got, b"+PONG\r\n+OK\r\n");
    let mut plain = Conn::connect(server.addr());
    assert_eq!(plain.cmd(&[b"GET", b"k"]), b"$3\r\ntls\r\n");
    let info = plain.cmd(&[b"CONFIG", b"GET", b"tls-port"]);
    assert!(
        String::from_utf8_lossy(&info).contains(&tls_addr.port().to_string()),
        "{info:?}"
    );
}

/// Table 2 "TLS": `rediss://` with redis-cli (Debian builds it with TLS). `--insecure`
/// because the certificate is self-signed; `--cacert` proves the chain is served right.
#[test]
fn redis_cli_connects_with_rediss_urls() {
    let cert = TestCert::new("cli");
    let server = tls_server(&cert);
    let port = server.tls_addr().unwrap().port().to_string();
    let url = format!("rediss://127.0.0.1:{port}");
    let run = |args: &[&str]| {
        let out = Command::new("redis-cli")
            .args(args)
            .output()
            .expect("redis-cli is needed for this test (Debian: apt-get install redis-tools)");
        (
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        )
    };
    assert_eq!(run(&["-u", &url, "--insecure", "PING"]).0, "PONG");
    assert_eq!(
        run(&["--tls", "--insecure", "-p", &port, "SET", "via", "cli"]).0,
        "OK"
    );
    let cacert = cert.path("cert.pem");
    assert_eq!(
        run(&[
            "--tls",
            "--cacert",
            &cacert,
            "--sni",
            "localhost",
            "-h",
            "localhost",
            "-p",
            &port,
            "GET",
            "via"
        ])
        .0,
        "cli"
    );
}

/// Table 2 "TLS": plaintext on the TLS port is closed without harming the server, and a
/// client that does not trust the certificate fails the handshake.
#[test]
fn plaintext_and_untrusting_clients_are_turned_away() {
    let cert = TestCert::new("bad");
    let server = tls_server(&cert);
    let tls_addr = server.tls_addr().unwrap();
    for _ in 0..3 {
        let mut s = TcpStream::connect(tls_addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        // At most a TLS alert record (content type 21), never a RESP reply.
        assert!(got.is_empty() || got[0] == 0x15, "{got:?}");
    }
    let other = TestCert::new("other");
    let rt = runtime();
    let refused = rt.block_on(tls_exchange(
        tls_addr,
        &other.cert_pem,
        b"*1\r\n$4\r\nPING\r\n",
        7,
    ));
    assert!(
        refused.is_err(),
        "a client that does not trust the cert must fail"
    );
    let ok = rt
        .block_on(tls_exchange(
            tls_addr,
            &cert.cert_pem,
            b"*1\r\n$4\r\nPING\r\n",
            7,
        ))
        .unwrap();
    assert_eq!(ok, b"+PONG\r\n");
    let mut plain = Conn::connect(server.addr());
    assert_eq!(plain.cmd(&[b"PING"]), b"+PONG\r\n");
}

/// A TLS port needs its certificate and key; bad files stop the start with a clear message.
#[test]
fn tls_configuration_errors() {
    let missing = Config {
        tls_port: free_port(),
        ..Config::default()
    };
    assert!(missing.validate().is_err());
    let err = TestServer::start_with(Config {
        tls_port: free_port(),
        tls_cert_file: Some("/nonexistent/cert.pem".into()),
        tls_key_file: Some("/nonexistent/key.pem".into()),
        ..Config::default()
    })
    .unwrap_err();
    assert!(
        err.to_string().contains("cannot read certificates"),
        "{err}"
    );
}
