//! TLS like pveproxy: CA-signed leaf, SHA-256 fingerprint, HTTP/1.1 only.

use std::sync::{Arc, Mutex};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};

use crate::common::*;

/// Pins the leaf by fingerprint the way pve-apiclient does, recording what it saw.
#[derive(Debug)]
struct Pin {
    expected: String,
    seen: Mutex<Option<String>>,
}

impl ServerCertVerifier for Pin {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let fp = Sha256::digest(end_entity.as_ref())
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect::<Vec<_>>()
            .join(":");
        *self.seen.lock().unwrap() = Some(fp.clone());
        if fp == self.expected {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General("fingerprint mismatch".into()))
        }
    }

    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            m,
            c,
            d,
            &rustls::crypto::ring::default_provider().signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            m,
            c,
            d,
            &rustls::crypto::ring::default_provider().signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

fn pinned_client(expected: &str) -> (reqwest::Client, Arc<Pin>) {
    let pin = Arc::new(Pin {
        expected: expected.to_owned(),
        seen: Mutex::new(None),
    });
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .dangerous()
    .with_custom_certificate_verifier(pin.clone())
    .with_no_client_auth();
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    (
        reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .build()
            .unwrap(),
        pin,
    )
}

#[tokio::test]
async fn ca_bundle_verifies_and_server_speaks_http1_as_pve() {
    let sim = start().await;
    assert!(sim.handle.base_url().starts_with("https://127.0.0.1:"));
    let resp = sim.get("/version").await;
    assert_eq!(resp.status, 200);
    assert_eq!(
        resp.version,
        reqwest::Version::HTTP_11,
        "pveproxy does not speak h2"
    );
    assert_eq!(resp.headers["server"], "pve-api-daemon/3.0");
    assert_eq!(
        resp.headers["content-type"],
        "application/json;charset=UTF-8"
    );
    let data = resp.data();
    assert_eq!(data["release"], "9.1");
    assert!(data["version"].as_str().unwrap().starts_with("9.1"));
    assert!(sim.handle.ca_pem().contains("BEGIN CERTIFICATE"));
}

#[tokio::test]
async fn fingerprint_pins_the_leaf_certificate() {
    let sim = start().await;
    let fp = sim.handle.fingerprint().to_owned();
    assert_eq!(fp.len(), 95, "32 bytes as AA:BB:..: {fp}");
    assert!(
        fp.chars()
            .all(|c| c == ':' || c.is_ascii_digit() || c.is_ascii_uppercase())
    );

    let (client, pin) = pinned_client(&fp);
    let resp = client
        .get(sim.url("/version"))
        .header("Authorization", TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.version(),
        reqwest::Version::HTTP_11,
        "ALPN must not select h2"
    );
    assert_eq!(pin.seen.lock().unwrap().as_deref(), Some(fp.as_str()));

    let (wrong, _) = pinned_client(&["00"; 32].join(":"));
    assert!(
        wrong.get(sim.url("/version")).send().await.is_err(),
        "a wrong pin must fail the handshake"
    );

    // /nodes reports the same fingerprint, like PVE's ssl_fingerprint.
    let nodes = sim.get("/nodes").await.data();
    assert_eq!(nodes[0]["ssl_fingerprint"], fp.as_str());
    let ctl = sim
        .control(reqwest::Method::GET, "/fingerprint", None)
        .await;
    assert_eq!(ctl["fingerprint"], fp.as_str());
}

#[tokio::test]
async fn untrusted_clients_are_refused_and_ca_is_served() {
    let sim = start().await;
    let plain = reqwest::Client::builder()
        .tls_certs_only(Vec::<reqwest::Certificate>::new())
        .build()
        .unwrap();
    assert!(
        plain.get(sim.url("/version")).send().await.is_err(),
        "self-made CA must not be trusted by default"
    );
    let pem = sim
        .client
        .get(sim.control_url("/ca.pem"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(pem, sim.handle.ca_pem());
}

#[tokio::test]
async fn user_certificates_are_served() {
    let cert =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap();
    let dir = std::env::temp_dir().join(format!("pve-sim-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.signing_key.serialize_pem()).unwrap();
    let sim = start_with(|c| {
        c.tls = pve_sim::TlsSource::Files {
            cert: cert_path.clone(),
            key: key_path.clone(),
        };
    })
    .await;
    let expected = Sha256::digest(cert.cert.der().as_ref())
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":");
    assert_eq!(sim.handle.fingerprint(), expected);
    assert_eq!(sim.handle.ca_pem(), cert.cert.pem());
    assert_eq!(
        sim.get("/version").await.status,
        200,
        "the client trusts the given certificate"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
