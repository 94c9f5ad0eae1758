//! The route table: every endpoint the simulator models, with the parameters
//! it accepts, plus the generic answers for the rest of PVE's API (see
//! [`crate::api::generic`]). Paths are matched through a tree of path
//! segments, literal segments before `{variables}` like PVE's
//! `find_handler`, so a request costs a few hash lookups however many
//! routes there are.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::{ApiError, Call, Reply};
use crate::api::generic::Answer;
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

/// What serves a method on a path.
#[derive(Clone, Copy, Debug)]
pub enum Endpoint {
    /// A modelled route (index into [`Router::routes`]).
    Modelled(usize),
    /// A path of PVE's API the simulator answers generically.
    Generic(&'static Answer),
}

#[derive(Default)]
struct Node {
    literal: HashMap<&'static str, Node>,
    var: Option<(&'static str, Box<Node>)>,
    template: &'static str,
    methods: Vec<(&'static str, Endpoint)>,
    /// The literal children, sorted (a directory index), filled in by `seal`.
    children: Vec<&'static str>,
}

impl Node {
    fn insert(&mut self, path: &'static str, method: &'static str, ep: Endpoint) {
        let mut node = self;
        for seg in segments(path) {
            node = match seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(name) => &mut node.var.get_or_insert_with(|| (name, Box::default())).1,
                None => node.literal.entry(seg).or_default(),
            };
        }
        node.template = path;
        if !node.methods.iter().any(|(m, _)| *m == method) {
            node.methods.push((method, ep));
        }
    }
}

fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|s| !s.is_empty())
}

impl Node {
    /// Precomputes every node's sorted children, so requests never sort.
    fn seal(&mut self) {
        self.children = self.literal.keys().copied().collect();
        self.children.sort_unstable();
        for child in self.literal.values_mut() {
            child.seal();
        }
        if let Some((_, child)) = self.var.as_mut() {
            child.seal();
        }
    }
}

/// A matched path: its template, endpoint (if the method exists) and the
/// decoded path variables.
pub struct Match<'a> {
    pub template: &'static str,
    pub endpoint: Option<Endpoint>,
    pub vars: Vec<(&'static str, String)>,
    /// The path's subdirectories (for directory indexes).
    pub children: &'a [&'static str],
}

pub struct Router {
    pub routes: Vec<Route>,
    root: Node,
}

impl Router {
    pub fn new(
        routes: Vec<Route>,
        generic: impl IntoIterator<Item = &'static (&'static str, &'static str, Answer)>,
    ) -> Self {
        let mut root = Node::default();
        for (i, r) in routes.iter().enumerate() {
            root.insert(r.path, r.method, Endpoint::Modelled(i));
        }
        for (path, method, answer) in generic.into_iter() {
            root.insert(path, method, Endpoint::Generic(answer));
        }
        root.seal();
        Self { routes, root }
    }

    /// Finds the endpoint for a method and concrete path.
    pub fn find<'a>(&'a self, method: &str, path: &str) -> Option<Match<'a>> {
        let mut node = &self.root;
        let mut vars = Vec::new();
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let mut i = 0;
        while let Some(seg) = segs.get(i) {
            node = match node.literal.get::<str>(seg) {
                Some(n) => n,
                None => {
                    let (name, n) = node.var.as_ref()?;
                    // A volume ID may come with unencoded slashes
                    // (`content/local:iso/x.iso`): it takes the rest.
                    let value = if *name == "volume" && n.literal.is_empty() && n.var.is_none() {
                        let rest = segs[i..].join("/");
                        i = segs.len();
                        rest
                    } else {
                        seg.to_string()
                    };
                    vars.push((*name, super::decode::uri_unescape(&value)));
                    n
                }
            };
            i += 1;
        }
        if node.methods.is_empty() {
            return None;
        }
        Some(Match {
            template: node.template,
            endpoint: node
                .methods
                .iter()
                .find(|(m, _)| *m == method)
                .map(|(_, e)| *e),
            vars,
            children: &node.children,
        })
    }

    pub fn route(&self, i: usize) -> &Route {
        &self.routes[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn nothing(_: Arc<Instance>, _: Call) -> Result<Reply, ApiError> {
        Ok(Reply::null())
    }

    fn route(method: &'static str, path: &'static str) -> Route {
        Route {
            method,
            path,
            params: &[],
            access: Access::Authenticated,
            handler: crate::sim_handler!(nothing),
        }
    }

    #[test]
    fn literal_segments_win_over_variables() {
        let r = Router::new(
            vec![
                route("GET", "/nodes/{node}/qemu/{vmid}"),
                route("GET", "/nodes/{node}/qemu/{vmid}/status/current"),
                route("GET", "/nodes/{node}/status"),
            ],
            &[],
        );
        let m = r.find("GET", "/nodes/pve/status").unwrap();
        assert_eq!(m.template, "/nodes/{node}/status");
        assert!(matches!(m.endpoint, Some(Endpoint::Modelled(2))));
        let m = r.find("GET", "/nodes/pve/qemu/100/status/current").unwrap();
        assert_eq!(m.vars, vec![("node", "pve".into()), ("vmid", "100".into())]);
        let m = r.find("POST", "/nodes/pve/qemu/100").unwrap();
        assert!(m.endpoint.is_none());
        assert!(r.find("GET", "/nodes/pve/qemu/100/status").is_none());
        assert!(r.find("GET", "/nope").is_none());
    }
}
