//! TLS like pveproxy: a per-cluster CA ("PVE Cluster Manager CA") signs the
//! node certificate, so clients can test CA-bundle verification as well as
//! fingerprint pinning. HTTP/1.1 only (pveproxy does not speak h2).

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha2::{Digest, Sha256};

use super::config::TlsSource;
use super::error::Error;

/// The certificate material a running simulator serves.
pub struct TlsMaterial {
    pub server_config: Arc<ServerConfig>,
    /// PEM of the CA that signed the leaf (or the given certificate chain).
    pub ca_pem: String,
    /// SHA-256 of the leaf DER, `AA:BB:...` (32 bytes, upper case).
    pub fingerprint: String,
}

impl TlsMaterial {
    pub fn load(source: &TlsSource, first_node: &str) -> Result<Self, Error> {
        let (chain, key, ca_pem) = match source {
            TlsSource::Generate => generate(first_node)?,
            TlsSource::Files { cert, key } => read_files(cert, key)?,
        };
        let leaf = chain
            .first()
            .ok_or_else(|| Error::Tls("certificate file holds no certificate".into()))?;
        let fingerprint = fingerprint(leaf.as_ref());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut server_config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Tls(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| Error::Tls(e.to_string()))?;
        server_config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            server_config: Arc::new(server_config),
            ca_pem,
            fingerprint,
        })
    }
}

/// Proxmox's fingerprint form: SHA-256 of the DER, upper-case hex, colons.
pub fn fingerprint(der: &[u8]) -> String {
    Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

type Chain = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>, String);

/// A distinguished name from (type, value) pairs.
fn dn(entries: &[(DnType, &str)]) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    for (ty, value) in entries {
        name.push(ty.clone(), *value);
    }
    name
}

/// Parameters valid for (almost) ever, so tests never see an expired certificate.
fn params(
    sans: Vec<String>,
    name: DistinguishedName,
    usages: Vec<KeyUsagePurpose>,
) -> Result<CertificateParams, rcgen::Error> {
    let mut p = CertificateParams::new(sans)?;
    p.distinguished_name = name;
    p.key_usages = usages;
    p.not_before = rcgen::date_time_ymd(2024, 1, 1);
    p.not_after = rcgen::date_time_ymd(2099, 12, 31);
    Ok(p)
}

fn generate(node: &str) -> Result<Chain, Error> {
    let tls = |e: rcgen::Error| Error::Tls(e.to_string());
    let ca_name = dn(&[
        (DnType::CommonName, "Proxmox Virtual Environment"),
        (DnType::OrganizationalUnitName, "pve-sim"),
        (DnType::OrganizationName, "PVE Cluster Manager CA"),
    ]);
    let ca_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let mut ca_params = params(Vec::new(), ca_name, ca_usages).map_err(tls)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().map_err(tls)?;
    let ca_cert = ca_params.self_signed(&ca_key).map_err(tls)?;
    let issuer = Issuer::new(ca_params, ca_key);

    // Like pve-cluster's gen_pve_ssl_cert: OU/O/CN=<node>, SANs for the node and loopback.
    let sans = [node, "localhost", "127.0.0.1", "::1"]
        .map(str::to_owned)
        .to_vec();
    let leaf_name = dn(&[
        (DnType::OrganizationalUnitName, "PVE Cluster Node"),
        (DnType::OrganizationName, "Proxmox Virtual Environment"),
        (DnType::CommonName, node),
    ]);
    let leaf_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let mut leaf_params = params(sans, leaf_name, leaf_usages).map_err(tls)?;
    leaf_params.use_authority_key_identifier_extension = true;
    leaf_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let leaf_key = KeyPair::generate().map_err(tls)?;
    let leaf_cert = leaf_params.signed_by(&leaf_key, &issuer).map_err(tls)?;

    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    Ok((vec![leaf_cert.der().clone()], key, ca_cert.pem()))
}

fn read_files(cert: &std::path::Path, key: &std::path::Path) -> Result<Chain, Error> {
    let cert_pem = std::fs::read_to_string(cert)
        .map_err(|e| Error::Tls(format!("{}: {e}", cert.display())))?;
    let key_pem = std::fs::read(key).map_err(|e| Error::Tls(format!("{}: {e}", key.display())))?;
    let chain = rustls_pemfile::certs(&mut cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Tls(format!("{}: {e}", cert.display())))?;
    let key = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .map_err(|e| Error::Tls(format!("{}: {e}", key.display())))?
        .ok_or_else(|| Error::Tls(format!("{}: no private key found", key.display())))?;
    Ok((chain, key, cert_pem))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_has_proxmox_form() {
        let fp = fingerprint(b"x");
        assert_eq!(fp.len(), 32 * 3 - 1);
        assert!(fp.split(':').all(|p| {
            p.len() == 2
                && p.chars()
                    .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
        }));
    }
}
