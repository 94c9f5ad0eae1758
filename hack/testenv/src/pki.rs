//! The certificates and keys of a test control plane, in the manner of
//! envtest's TinyCA: one throw-away CA signs the apiserver's serving
//! certificate and the admin's client certificate, and a separate key pair
//! signs ServiceAccount tokens. ECDSA P-256 throughout (rcgen's default).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

use crate::error::{Error, IoContext};

/// The admin user: the group `system:masters` is bound to cluster-admin by
/// the apiserver's bootstrap RBAC policy, as in envtest.
pub const ADMIN_USER: &str = "default";
pub const ADMIN_GROUP: &str = "system:masters";

/// PEM text of everything the control plane and its clients need.
pub struct Pki {
    pub ca_cert: String,
    pub serving_cert: String,
    pub serving_key: Secret,
    pub admin_cert: String,
    pub admin_key: Secret,
    pub service_account_public_key: String,
    pub service_account_key: Secret,
    /// The apiserver's client certificate towards kubelets (`kubectl logs`,
    /// `exec`), in `system:masters`; only a node (hack/node/) uses it.
    pub kubelet_client_cert: String,
    pub kubelet_client_key: Secret,
}

/// Private key PEM; never printed.
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Where [`Pki::write`] put the files the processes read.
#[derive(Debug, Clone)]
pub struct PkiFiles {
    pub ca_cert: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub service_account_public_key: PathBuf,
    pub service_account_key: PathBuf,
    pub kubelet_client_cert: PathBuf,
    pub kubelet_client_key: PathBuf,
}

impl Pki {
    pub fn generate() -> Result<Self, Error> {
        Self::generate_serving(&[])
    }

    /// Like [`generate`](Self::generate), with `extra_names` (host names or
    /// IP addresses) in the serving certificate besides loopback's.
    pub fn generate_serving(extra_names: &[String]) -> Result<Self, Error> {
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::default();
        ca_params.distinguished_name = name("testenv-ca", "testenv");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let ca = Issuer::new(ca_params, ca_key);

        let serving_key = KeyPair::generate()?;
        let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
        names.extend_from_slice(extra_names);
        let mut serving = CertificateParams::new(names)?;
        serving.distinguished_name = name("localhost", "testenv");
        serving.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_cert = serving.signed_by(&serving_key, &ca)?;

        let admin_key = KeyPair::generate()?;
        let mut admin = CertificateParams::default();
        admin.distinguished_name = name(ADMIN_USER, ADMIN_GROUP);
        admin.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let admin_cert = admin.signed_by(&admin_key, &ca)?;

        let kubelet_client_key = KeyPair::generate()?;
        let mut kubelet_client = CertificateParams::default();
        kubelet_client.distinguished_name = name("kube-apiserver-kubelet-client", ADMIN_GROUP);
        kubelet_client.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        kubelet_client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let kubelet_client_cert = kubelet_client.signed_by(&kubelet_client_key, &ca)?;

        let service_account_key = KeyPair::generate()?;

        Ok(Self {
            ca_cert: ca_cert.pem(),
            serving_cert: serving_cert.pem(),
            serving_key: Secret(serving_key.serialize_pem()),
            admin_cert: admin_cert.pem(),
            admin_key: Secret(admin_key.serialize_pem()),
            service_account_public_key: service_account_key.public_key_pem(),
            service_account_key: Secret(service_account_key.serialize_pem()),
            kubelet_client_cert: kubelet_client_cert.pem(),
            kubelet_client_key: Secret(kubelet_client_key.serialize_pem()),
        })
    }

    /// Writes the files the apiserver reads into `dir` (keys with mode 0600).
    /// The admin credentials go only into the kubeconfig.
    pub fn write(&self, dir: &Path) -> Result<PkiFiles, Error> {
        std::fs::create_dir_all(dir).context(|| format!("creating {}", dir.display()))?;
        let files = PkiFiles {
            ca_cert: dir.join("ca.crt"),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            service_account_public_key: dir.join("sa.pub"),
            service_account_key: dir.join("sa.key"),
            kubelet_client_cert: dir.join("kubelet-client.crt"),
            kubelet_client_key: dir.join("kubelet-client.key"),
        };
        write_file(&files.ca_cert, &self.ca_cert, 0o644)?;
        write_file(&files.serving_cert, &self.serving_cert, 0o644)?;
        write_file(&files.serving_key, self.serving_key.expose(), 0o600)?;
        write_file(
            &files.service_account_public_key,
            &self.service_account_public_key,
            0o644,
        )?;
        write_file(
            &files.service_account_key,
            self.service_account_key.expose(),
            0o600,
        )?;
        write_file(&files.kubelet_client_cert, &self.kubelet_client_cert, 0o644)?;
        write_file(
            &files.kubelet_client_key,
            self.kubelet_client_key.expose(),
            0o600,
        )?;
        Ok(files)
    }
}

fn name(common_name: &str, organization: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, organization);
    dn.push(DnType::CommonName, common_name);
    dn
}

pub(crate) fn write_file(path: &Path, contents: &str, mode: u32) -> Result<(), Error> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .context(|| format!("creating {}", path.display()))?;
    file.write_all(contents.as_bytes())
        .context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject};

    fn verify_serving_cert(pki: &Pki, name: &str) -> Result<(), rustls::Error> {
        crate::install_crypto_provider();
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(pki.ca_cert.as_bytes()).unwrap())
            .unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder(roots.into())
            .build()
            .unwrap();
        let leaf = CertificateDer::from_pem_slice(pki.serving_cert.as_bytes()).unwrap();
        verifier
            .verify_server_cert(
                &leaf,
                &[],
                &ServerName::try_from(name.to_owned()).unwrap(),
                &[],
                UnixTime::now(),
            )
            .map(|_| ())
    }

    use rustls::client::danger::ServerCertVerifier;

    #[test]
    fn serving_cert_chains_to_the_ca_for_loopback_names_only() {
        let pki = Pki::generate().unwrap();
        verify_serving_cert(&pki, "localhost").unwrap();
        verify_serving_cert(&pki, "127.0.0.1").unwrap();
        assert!(verify_serving_cert(&pki, "example.invalid").is_err());
    }

    #[test]
    fn extra_serving_names_are_verified_too() {
        let names = ["10.99.0.1".to_owned(), "kubernetes.default.svc".to_owned()];
        let pki = Pki::generate_serving(&names).unwrap();
        verify_serving_cert(&pki, "10.99.0.1").unwrap();
        verify_serving_cert(&pki, "kubernetes.default.svc").unwrap();
        verify_serving_cert(&pki, "127.0.0.1").unwrap();
        assert!(verify_serving_cert(&pki, "10.99.0.2").is_err());
    }

    #[test]
    fn a_foreign_ca_does_not_verify_the_serving_cert() {
        let pki = Pki::generate().unwrap();
        let other = Pki::generate().unwrap();
        let mixed = Pki {
            ca_cert: other.ca_cert,
            ..pki
        };
        assert!(verify_serving_cert(&mixed, "localhost").is_err());
    }

    #[test]
    fn secrets_are_redacted_in_debug_output() {
        let pki = Pki::generate().unwrap();
        let shown = format!("{:?}", pki.admin_key);
        assert_eq!(shown, "<redacted>");
        assert!(pki.admin_key.expose().contains("PRIVATE KEY"));
    }
}
