//! Login tickets and CSRF prevention tokens in PVE's textual forms:
//! `PVE:root@pam:66A3F0E1::<base64 signature>` and `66A3F0E1:<43 chars>`.
//! The signature is a keyed SHA-256 (PVE uses RSA); clients treat it as opaque.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use sha2::{Digest, Sha256};

pub struct TicketKey {
    key: [u8; 32],
    lifetime_secs: u64,
}

impl TicketKey {
    pub fn new(key: [u8; 32], lifetime_secs: u64) -> Self {
        Self { key, lifetime_secs }
    }

    fn mac(&self, data: &str) -> [u8; 32] {
        // HMAC-SHA256 per RFC 2104 with a 32-byte key (shorter than the block).
        let mut ipad = [0x36u8; 64];
        let mut opad = [0x5cu8; 64];
        for (i, b) in self.key.iter().enumerate() {
            ipad[i] ^= b;
            opad[i] ^= b;
        }
        let inner = Sha256::new()
            .chain_update(ipad)
            .chain_update(data.as_bytes())
            .finalize();
        Sha256::new()
            .chain_update(opad)
            .chain_update(inner)
            .finalize()
            .into()
    }

    /// A ticket for `user` issued at `now`.
    pub fn issue(&self, user: &str, now: u64) -> String {
        let plain = format!("PVE:{user}:{now:08X}");
        format!("{plain}::{}", STANDARD.encode(self.mac(&plain)))
    }

    /// Whether something issued at `issued` is still valid at `now`. Like
    /// PVE, up to 5 minutes in the future is accepted (clock skew between nodes).
    fn fresh(&self, issued: u64, now: u64) -> bool {
        let age = now as i64 - issued as i64;
        age >= -300 && age <= self.lifetime_secs as i64
    }

    /// The user of a valid, unexpired ticket.
    pub fn verify(&self, ticket: &str, now: u64) -> Option<String> {
        let (plain, sig) = ticket.split_once("::")?;
        let rest = plain.strip_prefix("PVE:")?;
        let (user, ts) = rest.rsplit_once(':')?;
        let issued = u64::from_str_radix(ts, 16).ok()?;
        if STANDARD.encode(self.mac(plain)) != sig {
            return None;
        }
        self.fresh(issued, now).then(|| user.to_owned())
    }

    /// The CSRF token belonging to a login of `user` at `now`.
    pub fn csrf(&self, user: &str, now: u64) -> String {
        let ts = format!("{now:08X}");
        format!(
            "{ts}:{}",
            STANDARD_NO_PAD.encode(self.mac(&format!("{ts}:{user}")))
        )
    }

    pub fn verify_csrf(&self, user: &str, token: &str, now: u64) -> bool {
        let Some((ts, _)) = token.split_once(':') else {
            return false;
        };
        let Ok(issued) = u64::from_str_radix(ts, 16) else {
            return false;
        };
        self.fresh(issued, now) && self.csrf(user, issued) == token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_verify_and_expire() {
        let k = TicketKey::new([7; 32], 7200);
        let t = k.issue("root@pam", 1_700_000_000);
        assert!(t.starts_with("PVE:root@pam:6553F100::"));
        assert_eq!(k.verify(&t, 1_700_000_100).as_deref(), Some("root@pam"));
        assert_eq!(k.verify(&t, 1_700_007_201), None);
        assert_eq!(k.verify(&t.replace("root", "evil"), 1_700_000_100), None);
        let c = k.csrf("root@pam", 1_700_000_000);
        assert_eq!(c.len(), 8 + 1 + 43);
        assert!(k.verify_csrf("root@pam", &c, 1_700_000_010));
        assert!(!k.verify_csrf("ci@pve", &c, 1_700_000_010));
    }
}
