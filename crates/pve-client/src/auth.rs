//! Authentication: API tokens, and tickets shared by all callers.
//!
//! Tickets live 2 h on PVE. The client renews after
//! [`AuthOptions::ticket_refresh_after`](crate::config::AuthOptions)
//! by posting the old ticket as the password (as the GUI does), falling back
//! to the password when that fails. One async mutex guards the ticket, so
//! when many callers find it stale at once exactly one logs in and the
//! others wait for its result (single flight).

use std::future::Future;
use std::time::Duration;

use reqwest::header::HeaderValue;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::config::Credentials;
use crate::error::{Error, Result};
use crate::secret::Secret;

/// A ticket and its CSRF token, as `POST /access/ticket` returns them.
#[derive(Clone, Debug)]
pub(crate) struct Ticket {
    pub(crate) ticket: Secret,
    pub(crate) csrf: Secret,
    pub(crate) obtained: Instant,
    /// Distinguishes tickets so a 401 invalidates only the one that failed.
    pub(crate) generation: u64,
}

/// Ticket state: the current ticket, if any, behind the single-flight lock.
#[derive(Debug)]
pub(crate) struct TicketCache {
    username: String,
    password: Secret,
    refresh_after: Duration,
    state: Mutex<Option<Ticket>>,
    /// Last generation handed out; never reused, even after invalidation.
    generations: std::sync::atomic::AtomicU64,
}

/// What a login attempt posts as the password.
pub(crate) enum LoginWith<'a> {
    Password(&'a Secret),
    /// Renewal: the old ticket is accepted as the password.
    OldTicket(&'a Secret),
}

/// Server lifetime of a ticket; a ticket older than this is not worth
/// trying to renew.
const TICKET_LIFETIME: Duration = Duration::from_secs(2 * 60 * 60);

impl TicketCache {
    pub(crate) fn new(username: String, password: Secret, refresh_after: Duration) -> Self {
        Self {
            username,
            password,
            refresh_after,
            state: Mutex::new(None),
            generations: std::sync::atomic::AtomicU64::new(0),
        }
    }

    pub(crate) fn username(&self) -> &str {
        &self.username
    }

    /// Returns a fresh ticket, logging in (once, for all waiting callers) if
    /// there is none or it is due for renewal. `login` performs
    /// `POST /access/ticket` and returns `(ticket, csrf)`.
    pub(crate) async fn get<F, Fut>(&self, login: F) -> Result<Ticket>
    where
        F: Fn(LoginWith<'_>) -> Fut,
        Fut: Future<Output = Result<(Secret, Secret)>>,
    {
        let mut state = self.state.lock().await;
        let now = Instant::now();
        if let Some(ticket) = state.as_ref()
            && now.saturating_duration_since(ticket.obtained) < self.refresh_after
        {
            return Ok(ticket.clone());
        }
        let previous = state.take();
        let generation = self
            .generations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let renewable = previous
            .as_ref()
            .filter(|t| now.saturating_duration_since(t.obtained) < TICKET_LIFETIME);
        let fresh = match renewable {
            Some(old) => match login(LoginWith::OldTicket(&old.ticket)).await {
                Ok(pair) => pair,
                Err(err) => {
                    tracing::debug!(error = %err, "ticket renewal failed; logging in with the password");
                    login(LoginWith::Password(&self.password)).await?
                }
            },
            None => login(LoginWith::Password(&self.password)).await?,
        };
        let ticket = Ticket {
            ticket: fresh.0,
            csrf: fresh.1,
            obtained: Instant::now(),
            generation,
        };
        *state = Some(ticket.clone());
        Ok(ticket)
    }

    /// Forgets the ticket of `generation` (after a 401), so the next call
    /// logs in again. A newer ticket obtained meanwhile is kept.
    pub(crate) async fn invalidate(&self, generation: u64) {
        let mut state = self.state.lock().await;
        if state.as_ref().is_some_and(|t| t.generation == generation) {
            *state = None;
        }
    }

    /// Secrets this cache holds, for redaction.
    pub(crate) async fn secrets(&self) -> Vec<Secret> {
        let state = self.state.lock().await;
        let mut out = vec![self.password.clone()];
        if let Some(t) = state.as_ref() {
            out.push(t.ticket.clone());
            out.push(t.csrf.clone());
        }
        out
    }
}

/// How requests are authenticated.
#[derive(Debug)]
pub(crate) enum Auth {
    Token { header: HeaderValue, secret: Secret },
    Ticket(TicketCache),
}

impl Auth {
    pub(crate) fn new(credentials: &Credentials, refresh_after: Duration) -> Result<Self> {
        match credentials {
            Credentials::Token { token_id, secret } => {
                let mut header =
                    HeaderValue::from_str(&format!("PVEAPIToken={token_id}={}", secret.expose()))
                        .map_err(|_| {
                        Error::config("API token contains characters not allowed in a header")
                    })?;
                // Keeps the value out of hyper/reqwest debug output.
                header.set_sensitive(true);
                Ok(Auth::Token {
                    header,
                    secret: secret.clone(),
                })
            }
            Credentials::Password { username, password } => Ok(Auth::Ticket(TicketCache::new(
                username.clone(),
                password.clone(),
                refresh_after,
            ))),
        }
    }
}

/// The `Cookie` header for a ticket. The ticket is sent as PVE issues it;
/// the server URI-unescapes cookie values, which leaves a raw ticket intact.
pub(crate) fn cookie_header(ticket: &Ticket) -> Result<HeaderValue> {
    let mut v = HeaderValue::from_str(&format!("PVEAuthCookie={}", ticket.ticket.expose()))
        .map_err(|_| Error::protocol("ticket contains characters not allowed in a cookie"))?;
    v.set_sensitive(true);
    Ok(v)
}

/// The `CSRFPreventionToken` header for a ticket.
pub(crate) fn csrf_header(ticket: &Ticket) -> Result<HeaderValue> {
    let mut v = HeaderValue::from_str(ticket.csrf.expose())
        .map_err(|_| Error::protocol("CSRF token contains characters not allowed in a header"))?;
    v.set_sensitive(true);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn cache(refresh: Duration) -> TicketCache {
        TicketCache::new("root@pam".into(), Secret::new("pw-secret"), refresh)
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_callers_share_one_login() {
        let cache = Arc::new(cache(Duration::from_secs(3600)));
        let logins = Arc::new(AtomicU32::new(0));
        let mut handles = Vec::new();
        for _ in 0..20 {
            let cache = Arc::clone(&cache);
            let logins = Arc::clone(&logins);
            handles.push(tokio::spawn(async move {
                cache
                    .get(|_| {
                        let logins = Arc::clone(&logins);
                        async move {
                            logins.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            Ok((Secret::new("PVE:ticket"), Secret::new("csrf")))
                        }
                    })
                    .await
            }));
        }
        for h in handles {
            assert_eq!(h.await.unwrap().unwrap().ticket.expose(), "PVE:ticket");
        }
        assert_eq!(logins.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn renews_with_old_ticket_then_falls_back_to_password() {
        let cache = cache(Duration::from_secs(60));
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let login = |with: LoginWith<'_>| {
            let seen = Arc::clone(&seen);
            let (kind, ok) = match with {
                LoginWith::Password(p) => (format!("password:{}", p.expose()), true),
                LoginWith::OldTicket(t) => (format!("ticket:{}", t.expose()), t.expose() != "T2"),
            };
            async move {
                let n = {
                    let mut seen = seen.lock().unwrap();
                    seen.push(kind);
                    seen.len()
                };
                if ok {
                    Ok((Secret::new(format!("T{n}")), Secret::new("c")))
                } else {
                    Err(Error::Unauthorized {
                        message: "expired".into(),
                    })
                }
            }
        };
        let t1 = cache.get(login).await.unwrap();
        assert_eq!(t1.ticket.expose(), "T1");
        // Still fresh: no login.
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(cache.get(login).await.unwrap().generation, t1.generation);
        // Due: renewed with the old ticket.
        tokio::time::advance(Duration::from_secs(31)).await;
        let t2 = cache.get(login).await.unwrap();
        assert_eq!(t2.ticket.expose(), "T2");
        // Due again: renewal with T2 fails, the password is used.
        tokio::time::advance(Duration::from_secs(61)).await;
        let t3 = cache.get(login).await.unwrap();
        assert_eq!(t3.ticket.expose(), "T4");
        assert_eq!(
            *seen.lock().unwrap(),
            [
                "password:pw-secret",
                "ticket:T1",
                "ticket:T2",
                "password:pw-secret"
            ]
        );
        // A 401 for an old generation keeps the current ticket; for the
        // current one it forces a new login.
        cache.invalidate(t2.generation).await;
        assert_eq!(cache.get(login).await.unwrap().generation, t3.generation);
        cache.invalidate(t3.generation).await;
        assert!(cache.get(login).await.unwrap().generation > t3.generation);
    }

    #[test]
    fn token_header_is_sensitive_and_well_formed() {
        let creds = Credentials::token_from_str("ci@pve!prov=abc-123").unwrap();
        let Auth::Token { header, .. } = Auth::new(&creds, Duration::from_secs(1)).unwrap() else {
            panic!("token auth expected")
        };
        assert!(header.is_sensitive());
        assert_eq!(header.to_str().unwrap(), "PVEAPIToken=ci@pve!prov=abc-123");
        assert!(!format!("{header:?}").contains("abc-123"));
    }
}
