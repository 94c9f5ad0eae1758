//! The route table: every endpoint the simulator serves, with the parameters
//! it accepts. The schema conformance test walks this same table.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::Param;

pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<Reply, ApiError>> + Send>>;
pub type Handler = fn(Arc<Instance>, Call) -> HandlerFuture;

/// Who may call a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Any authenticated caller (handlers check privileges themselves).
    Authenticated,
    /// No authentication (`/access/ticket`).
    World,
}

/// One endpoint: method, path template under `/api2/json`, parameters.
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    /// Parameter groups, concatenated (path parameters included, as in the schema).
    pub params: &'static [&'static [Param]],
    pub access: Access,
    pub handler: Handler,
}

impl Route {
    pub fn params(&self) -> impl Iterator<Item = &'static Param> + Clone {
        self.params.iter().flat_map(|group| group.iter())
    }

    /// Matches a concrete path; returns the decoded path parameters.
    pub fn match_path(&self, path: &str) -> Option<Vec<(String, String)>> {
        let tmpl: Vec<&str> = self.path.trim_matches('/').split('/').collect();
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        if tmpl.len() != segs.len() {
            return None;
        }
        let mut vars = Vec::new();
        for (t, s) in tmpl.iter().zip(&segs) {
            if let Some(name) = t.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
                if s.is_empty() {
                    return None;
                }
                vars.push((name.to_owned(), super::decode::uri_unescape(s)));
            } else if t != s {
                return None;
            }
        }
        Some(vars)
    }
}

/// Wraps an `async fn(Arc<Instance>, Call) -> Result<Reply, ApiError>` as a [`Handler`].
#[macro_export]
#[doc(hidden)]
macro_rules! sim_handler {
    ($f:path) => {{
        fn boxed(
            inst: ::std::sync::Arc<$crate::instance::Instance>,
            call: $crate::http::Call,
        ) -> $crate::http::router::HandlerFuture {
            Box::pin($f(inst, call))
        }
        boxed as $crate::http::router::Handler
    }};
}

/// Finds the route for a method and path.
pub fn find<'a>(
    routes: &'a [Route],
    method: &str,
    path: &str,
) -> Option<(&'a Route, Vec<(String, String)>)> {
    routes
        .iter()
        .filter(|r| r.method == method)
        .find_map(|r| r.match_path(path).map(|vars| (r, vars)))
}

/// The template of any route matching `path` (for statistics of 501s).
pub fn template_of(routes: &[Route], path: &str) -> Option<&'static str> {
    routes
        .iter()
        .find(|r| r.match_path(path).is_some())
        .map(|r| r.path)
}
