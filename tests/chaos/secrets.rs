//! The run's secrets and the search for them: the API token secret, the
//! login password, the cloud-init password (each also base64-encoded, as a
//! Secret's `data` would show it) and anything shaped like a PVE login
//! ticket or CSRF token must appear nowhere the suite can read.

use rand::distr::{Alphanumeric, SampleString};
use regex::Regex;

/// Fresh random secrets (not from the seed: a secret must not be derivable).
pub struct Credentials {
    pub token_secret: String,
    pub checker_secret: String,
    pub password: String,
    pub cloud_init_password: String,
}

/// The provider's API token and the login user.
pub const TOKEN_ID: &str = "root@pam!chaos";
pub const LOGIN_USER: &str = "root@pam";
const CHECKER_TOKEN_ID: &str = "root@pam!checker";

impl Credentials {
    pub fn generate() -> Self {
        let mut rng = rand::rng();
        let mut secret = || Alphanumeric.sample_string(&mut rng, 32);
        Self {
            token_secret: secret(),
            checker_secret: secret(),
            password: secret(),
            cloud_init_password: secret(),
        }
    }

    /// `--api-token` of the provider's token.
    pub fn provider_token(&self) -> String {
        format!("{TOKEN_ID}={}", self.token_secret)
    }

    /// `--api-token` of the checker's token (the suite's own reads).
    pub fn checker_token(&self) -> String {
        format!("{CHECKER_TOKEN_ID}={}", self.checker_secret)
    }

    /// `--user` of the login.
    pub fn login(&self) -> String {
        format!("{LOGIN_USER}:{}", self.password)
    }

    /// What must never be found: (what it is, the text).
    fn needles(&self) -> Vec<(String, String)> {
        let mut needles = Vec::new();
        for (what, value) in [
            ("API token secret", &self.token_secret),
            ("checker token secret", &self.checker_secret),
            ("login password", &self.password),
            ("cloud-init password", &self.cloud_init_password),
        ] {
            let encoded = base64(value);
            needles.push((what.to_owned(), value.clone()));
            needles.push((format!("{what} (base64)"), encoded));
        }
        needles
    }
}

/// Base64 the way a Secret's `data` shows it (k8s-openapi's `ByteString`
/// serializes so).
fn base64(text: &str) -> String {
    match serde_json::to_value(k8s_openapi::ByteString(text.as_bytes().to_vec())) {
        Ok(serde_json::Value::String(encoded)) => encoded,
        other => panic!("ByteString serializes as a string, got {other:?}"),
    }
}

/// Text to search, and where it came from.
pub struct Haystack {
    pub source: String,
    pub text: String,
}

/// A secret found somewhere.
#[derive(Debug)]
pub struct Leak {
    pub what: String,
    pub source: String,
    pub line: usize,
    /// The line with the secret masked.
    pub excerpt: String,
}

/// Login tickets (`PVE:user@realm:HEXTIME::signature`) and CSRF prevention
/// tokens (`HEXTIME:signature`), whoever issued them.
fn shapes() -> Vec<(&'static str, Regex)> {
    vec![
        (
            "PVE login ticket",
            Regex::new(r"PVE:[^\s:]+@[^\s:]+:[0-9A-F]{8}::[A-Za-z0-9+/]{16,}").expect("regex"),
        ),
        (
            "CSRF prevention token",
            Regex::new(r"\b[0-9A-F]{8}:[A-Za-z0-9+/]{43}\b").expect("regex"),
        ),
    ]
}

/// Every occurrence of a secret in the haystacks.
pub fn scan(creds: &Credentials, haystacks: &[Haystack]) -> Vec<Leak> {
    let needles = creds.needles();
    let shapes = shapes();
    let mut leaks = Vec::new();
    for haystack in haystacks {
        for (n, line) in haystack.text.lines().enumerate() {
            let mut found: Vec<(String, String)> = needles
                .iter()
                .filter(|(_, value)| line.contains(value.as_str()))
                .map(|(what, value)| (what.clone(), value.clone()))
                .collect();
            for (what, shape) in &shapes {
                found.extend(
                    shape
                        .find_iter(line)
                        .map(|m| ((*what).to_owned(), m.as_str().to_owned())),
                );
            }
            for (what, value) in found {
                leaks.push(Leak {
                    what,
                    source: haystack.source.clone(),
                    line: n + 1,
                    excerpt: excerpt(&line.replace(&value, "<SECRET>")),
                });
            }
        }
    }
    leaks
}

fn excerpt(line: &str) -> String {
    const MAX: usize = 300;
    if line.chars().count() <= MAX {
        line.to_owned()
    } else {
        format!("{}...", line.chars().take(MAX).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hay(text: &str) -> Vec<Haystack> {
        vec![Haystack {
            source: "test".into(),
            text: text.into(),
        }]
    }

    #[test]
    fn finds_each_secret_plainly_and_base64_encoded_and_masks_it() {
        let creds = Credentials::generate();
        let encoded = base64(&creds.password);
        let text = format!(
            "ok line\ntoken={}\nSecret data: {encoded}\ncipassword {}\n",
            creds.token_secret, creds.cloud_init_password
        );
        let leaks = scan(&creds, &hay(&text));
        let whats: Vec<&str> = leaks.iter().map(|l| l.what.as_str()).collect();
        assert_eq!(
            whats,
            [
                "API token secret",
                "login password (base64)",
                "cloud-init password"
            ]
        );
        assert_eq!(leaks[0].line, 2);
        assert_eq!(leaks[0].excerpt, "token=<SECRET>");
    }

    #[test]
    fn finds_tickets_and_csrf_tokens_of_any_login() {
        let creds = Credentials::generate();
        let ticket = "PVE:root@pam:6B0D3C5B::c2lnbmF0dXJlLW9mLWEtdGlja2V0LXRoYXQtaXMtbG9uZw==";
        let csrf = "6B0D3C5B:abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ";
        let leaks = scan(&creds, &hay(&format!("cookie {ticket}\nheader {csrf}")));
        let whats: Vec<&str> = leaks.iter().map(|l| l.what.as_str()).collect();
        assert_eq!(whats, ["PVE login ticket", "CSRF prevention token"]);
    }

    #[test]
    fn upids_and_ordinary_logs_are_not_mistaken_for_secrets() {
        let creds = Credentials::generate();
        let text = "UPID:pve:00090000:0D0155E3:6B0D3C5B:qmcreate:100:root@pam!chaos:\n\
                    token root@pam!chaos user root@pam pass done";
        assert!(scan(&creds, &hay(text)).is_empty());
    }
}
