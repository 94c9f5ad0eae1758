//! TLS for the Proxmox client: system roots, a CA bundle, fingerprint
//! pinning as Proxmox does it, and an explicit insecure mode.
//!
//! PVE's default certificate is signed by a per-cluster CA nobody trusts, so
//! peers tell users to turn verification off. Pinning is the better answer:
//! the SHA-256 of the leaf certificate (DER), written `AA:BB:...` exactly as
//! `pvenode cert info` and the GUI show it. A pinned leaf is accepted
//! whatever its issuer, name or dates (pve-apiclient does the same), but the
//! handshake signature is still verified, so the server must hold the key.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, OtherError, RootCertStore, SignatureScheme};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// SHA-256 fingerprint of a DER certificate, displayed `AA:BB:...:FF`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// Fingerprint of a DER-encoded certificate.
    pub fn of_der(der: &[u8]) -> Self {
        Self(Sha256::digest(der).into())
    }

    /// The raw digest.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl FromStr for Fingerprint {
    type Err = Error;

    /// Accepts PVE's `AA:BB:...` form (either case) and plain 64-digit hex.
    fn from_str(s: &str) -> Result<Self> {
        let hex: String = s.trim().chars().filter(|c| *c != ':').collect();
        let bad = || {
            Error::config(format!(
                "invalid certificate fingerprint {s:?}: expected 32 hex bytes like AA:BB:..:FF"
            ))
        };
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        // With colons, they must sit between every byte pair.
        if s.contains(':') && s.trim().split(':').any(|pair| pair.len() != 2) {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(Self(out))
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{b:02X}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

/// How the server certificate is checked.
#[derive(Clone, Debug, Default)]
pub struct TlsOptions {
    /// PEM CA bundle to trust *instead of* the system roots (e.g.
    /// `/etc/pve/pve-root-ca.pem`).
    pub ca_pem: Option<String>,
    /// Accepted leaf fingerprints. When non-empty, the leaf must match one of
    /// them and nothing else is checked (list two during a certificate
    /// rotation).
    pub pinned_fingerprints: Vec<Fingerprint>,
    /// Skip certificate verification entirely. Logged as a warning.
    pub insecure_skip_verify: bool,
}

/// The error a pinning verifier returns; the client turns it into an
/// [`Error::Tls`] whose message shows the presented fingerprint.
#[derive(Debug, thiserror::Error)]
#[error(
    "server certificate fingerprint {presented} matches none of the pinned fingerprints ({})",
    pinned.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
)]
pub struct PinMismatch {
    pub presented: Fingerprint,
    pub pinned: Vec<Fingerprint>,
}

/// Builds the rustls configuration for these options, with the process
/// crypto provider (ring; see [`crate::install_crypto_provider`]).
pub(crate) fn client_config(opts: &TlsOptions) -> Result<rustls::ClientConfig> {
    crate::install_crypto_provider();
    let provider = CryptoProvider::get_default()
        .cloned()
        .ok_or_else(|| Error::config("no rustls crypto provider installed"))?;
    let algorithms = provider.signature_verification_algorithms;

    let verifier: Arc<dyn ServerCertVerifier> = if opts.insecure_skip_verify {
        tracing::warn!(
            "TLS certificate verification is DISABLED for this Proxmox endpoint; \
             pin the certificate fingerprint instead"
        );
        Arc::new(LeafVerifier {
            policy: LeafPolicy::Any,
            algorithms,
        })
    } else if !opts.pinned_fingerprints.is_empty() {
        Arc::new(LeafVerifier {
            policy: LeafPolicy::Pinned(opts.pinned_fingerprints.clone()),
            algorithms,
        })
    } else {
        let roots = match &opts.ca_pem {
            Some(pem) => roots_from_pem(pem)?,
            None => system_roots(),
        };
        WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| Error::config(format!("cannot build certificate verifier: {e}")))?
    };

    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::config(format!("TLS protocol setup failed: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    // PVE speaks HTTP/1.1 only, and its error text lives in the HTTP/1
    // reason phrase.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The trust anchors of a PEM bundle. webpki checks no anchor's dates, so
/// an anchor outside its validity (expired, or not valid yet) is left out
/// here, as `openssl verify` refuses a chain to one; a bundle with no
/// anchor left is refused, naming them.
fn roots_from_pem(pem: &str) -> Result<RootCertStore> {
    roots_from_pem_at(pem, std::time::SystemTime::now())
}

fn roots_from_pem_at(pem: &str, now: std::time::SystemTime) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    let mut reader = pem.as_bytes();
    let mut count = 0;
    let mut outdated = vec![];
    let now = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    for cert in rustls_pemfile::certs(&mut reader) {
        let cert = cert.map_err(|e| Error::config(format!("invalid CA bundle: {e}")))?;
        count += 1;
        if let Some(why) = outside_validity(&cert, now) {
            tracing::warn!(certificate = %why, "CA bundle certificate left out: not valid now");
            outdated.push(why);
            continue;
        }
        roots
            .add(cert)
            .map_err(|e| Error::config(format!("invalid CA certificate: {e}")))?;
    }
    if count == 0 {
        return Err(Error::config("CA bundle contains no PEM certificate"));
    }
    if roots.is_empty() {
        return Err(Error::config(format!(
            "no certificate of the CA bundle is valid now: {}",
            outdated.join("; ")
        )));
    }
    Ok(roots)
}

/// Why a certificate is not valid at `now` (seconds since the epoch), or
/// `None`. A certificate that cannot be parsed here is left to rustls.
fn outside_validity(cert: &rustls::pki_types::CertificateDer<'_>, now: i64) -> Option<String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let validity = parsed.validity();
    let subject = parsed.subject().to_string();
    if validity.not_after.timestamp() < now {
        Some(format!("{subject} expired on {}", validity.not_after))
    } else if validity.not_before.timestamp() > now {
        Some(format!(
            "{subject} is not valid before {}",
            validity.not_before
        ))
    } else {
        None
    }
}

fn system_roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
    let loaded = rustls_native_certs::load_native_certs();
    for err in &loaded.errors {
        tracing::debug!(error = %err, "could not load some system CA certificates");
    }
    let (added, ignored) = roots.add_parsable_certificates(loaded.certs);
    tracing::debug!(added, ignored, "system CA roots loaded");
    roots
}

/// What a [`LeafVerifier`] accepts.
#[derive(Debug)]
enum LeafPolicy {
    /// A leaf whose SHA-256 is one of these; nothing else is checked.
    Pinned(Vec<Fingerprint>),
    /// Any certificate (insecure mode).
    Any,
}

/// A verifier that judges the leaf alone (pinning, insecure mode) but, like
/// every verifier, checks the handshake signatures: the server must hold
/// the key of the certificate it shows.
#[derive(Debug)]
struct LeafVerifier {
    policy: LeafPolicy,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for LeafVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let pins = match &self.policy {
            LeafPolicy::Any => return Ok(ServerCertVerified::assertion()),
            LeafPolicy::Pinned(pins) => pins,
        };
        let presented = Fingerprint::of_der(end_entity.as_ref());
        if pins.contains(&presented) {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(CertificateError::Other(
                OtherError(Arc::new(PinMismatch {
                    presented,
                    pinned: pins.clone(),
                })),
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Finds a TLS failure in an error chain and describes it; `None` when the
/// chain holds no TLS error.
pub(crate) fn describe_tls_error(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = current {
        if let Some(tls) = as_rustls(e) {
            return Some(describe_rustls(tls));
        }
        current = e.source();
    }
    None
}

fn as_rustls<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    if let Some(tls) = e.downcast_ref::<rustls::Error>() {
        return Some(tls);
    }
    // hyper-util and tokio-rustls wrap the rustls error in (nested)
    // io::Errors, whose `source()` skips the wrapped error itself: descend
    // through `get_ref` instead.
    let mut io = e.downcast_ref::<std::io::Error>();
    while let Some(inner) = io.and_then(std::io::Error::get_ref) {
        if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        io = inner.downcast_ref::<std::io::Error>();
    }
    None
}

fn describe_rustls(err: &rustls::Error) -> String {
    if let rustls::Error::InvalidCertificate(CertificateError::Other(other)) = err
        && let Some(pin) = other.0.downcast_ref::<PinMismatch>()
    {
        return pin.to_string();
    }
    format!("certificate verification failed: {err}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const FP: &str = "4E:9A:1F:03:77:0C:5D:21:B8:19:66:AA:02:C4:70:EE:51:93:7B:F0:19:2D:3C:88:A1:04:55:E2:6B:DD:09:7F";

    #[test]
    fn fingerprint_forms() {
        let fp: Fingerprint = FP.parse().unwrap();
        assert_eq!(fp.to_string(), FP);
        let lower: Fingerprint = FP.to_lowercase().parse().unwrap();
        assert_eq!(lower, fp);
        let bare: Fingerprint = FP.replace(':', "").parse().unwrap();
        assert_eq!(bare, fp);
        assert!("AA:BB".parse::<Fingerprint>().is_err());
        assert!(FP.replace("4E", "ZZ").parse::<Fingerprint>().is_err());
        // Colons in the wrong places.
        let shifted = format!("4:E{}", &FP[2..]);
        assert!(shifted.parse::<Fingerprint>().is_err());
    }

    /// A self-signed CA valid from `from` to `to` (years), as PEM.
    fn ca(name: &str, from: i32, to: i32) -> String {
        let mut params = rcgen::CertificateParams::new(vec![]).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.not_before = rcgen::date_time_ymd(from, 1, 1);
        params.not_after = rcgen::date_time_ymd(to, 1, 1);
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().pem()
    }

    #[test]
    fn ca_anchors_outside_their_validity_are_not_trusted() {
        let now = std::time::SystemTime::now();
        let expired = ca("expired CA", 2000, 2001);
        let future = ca("future CA", 2400, 2500);
        let valid = ca("valid CA", 2000, 2400);
        let e = roots_from_pem_at(&expired, now).unwrap_err().to_string();
        assert!(
            e.contains("no certificate of the CA bundle is valid now")
                && e.contains("CN=expired CA expired on"),
            "{e}"
        );
        let e = roots_from_pem_at(&future, now).unwrap_err().to_string();
        assert!(e.contains("CN=future CA is not valid before"), "{e}");
        let roots = roots_from_pem_at(&format!("{expired}{valid}{future}"), now).unwrap();
        assert_eq!(roots.len(), 1, "only the valid anchor is trusted");
        assert_eq!(roots_from_pem_at(&valid, now).unwrap().len(), 1);
    }

    #[test]
    fn fingerprint_of_der_is_sha256() {
        // SHA-256 of the empty input.
        assert_eq!(
            Fingerprint::of_der(b"").to_string(),
            "E3:B0:C4:42:98:FC:1C:14:9A:FB:F4:C8:99:6F:B9:24:27:AE:41:E4:64:9B:93:4C:A4:95:99:1B:78:52:B8:55"
        );
    }

    #[test]
    fn pin_mismatch_message_shows_presented_fingerprint() {
        let presented = Fingerprint::of_der(b"cert");
        let pinned: Fingerprint = FP.parse().unwrap();
        let err = rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(
            PinMismatch {
                presented,
                pinned: vec![pinned],
            },
        ))));
        // Wrapped twice, as hyper-util and tokio-rustls do.
        let io = std::io::Error::other(std::io::Error::new(std::io::ErrorKind::InvalidData, err));
        let message = describe_tls_error(&io).unwrap();
        assert!(message.contains(&presented.to_string()), "{message}");
        assert!(message.contains(FP), "{message}");
    }

    #[test]
    fn bad_ca_bundle_is_a_config_error() {
        assert!(matches!(
            roots_from_pem("not pem"),
            Err(Error::Config { .. })
        ));
    }
}
