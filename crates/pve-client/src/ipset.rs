//! IP sets and their entries, the cluster's (`/cluster/firewall/ipset`)
//! and a guest's own (`/nodes/{node}/{qemu|lxc}/{vmid}/firewall/ipset`):
//! the same calls under another base path. Plain calls that answer at
//! once; a change or removal of an entry carries the entry list's digest.

use reqwest::Method;

use crate::client::Client;
use crate::error::Result;
use crate::firewall::{Entry, Named};
use crate::form::Params;
use crate::request::ApiPath;
use crate::snapshot::{Guest, GuestType};

/// Whose IP sets: the cluster's or one guest's.
#[derive(Clone, Copy, Debug)]
pub enum Scope<'a> {
    /// `/cluster/firewall/ipset`.
    Cluster,
    /// `.../{qemu|lxc}/{vmid}/firewall/ipset`.
    Guest(&'a Guest),
}

/// The path of the set list (`name` None), of one set, or of one entry.
fn path(scope: Scope<'_>, name: Option<&str>, cidr: Option<&str>) -> ApiPath {
    let (name, cidr) = (name.unwrap_or_default(), cidr.unwrap_or_default());
    let depth = usize::from(!name.is_empty()) + usize::from(!cidr.is_empty());
    let Scope::Guest(guest) = scope else {
        let template = [
            "/cluster/firewall/ipset",
            "/cluster/firewall/ipset/{name}",
            "/cluster/firewall/ipset/{name}/{cidr}",
        ][depth];
        return ApiPath::new(template, &[name, cidr]);
    };
    let template = match guest.kind {
        GuestType::Qemu => [
            "/nodes/{node}/qemu/{vmid}/firewall/ipset",
            "/nodes/{node}/qemu/{vmid}/firewall/ipset/{name}",
            "/nodes/{node}/qemu/{vmid}/firewall/ipset/{name}/{cidr}",
        ],
        GuestType::Lxc => [
            "/nodes/{node}/lxc/{vmid}/firewall/ipset",
            "/nodes/{node}/lxc/{vmid}/firewall/ipset/{name}",
            "/nodes/{node}/lxc/{vmid}/firewall/ipset/{name}/{cidr}",
        ],
    }[depth];
    let vmid = guest.vmid.to_string();
    ApiPath::new(template, &[&guest.node, &vmid, name, cidr])
}

impl Client {
    /// `GET .../ipset`: the sets, with their comments.
    pub async fn ip_sets(&self, scope: Scope<'_>) -> Result<Vec<Named>> {
        self.get(path(scope, None, None), Params::new()).await
    }

    /// `POST .../ipset`: a new, empty set.
    pub async fn create_ip_set(&self, scope: Scope<'_>, name: &str, comment: &str) -> Result<()> {
        let params = Params::new().text("name", name).text("comment", comment);
        self.fw_write(Method::POST, path(scope, None, None), params)
            .await
    }

    /// `POST .../ipset` with `rename` = `name`: sets the comment.
    pub async fn set_ip_set_comment(
        &self,
        scope: Scope<'_>,
        name: &str,
        comment: &str,
    ) -> Result<()> {
        let params = Params::new()
            .text("name", name)
            .text("rename", name)
            .text("comment", comment);
        self.fw_write(Method::POST, path(scope, None, None), params)
            .await
    }

    /// `DELETE .../ipset/{name}` with `force`: its entries go with it.
    pub async fn delete_ip_set(&self, scope: Scope<'_>, name: &str) -> Result<()> {
        let params = Params::new().flag("force", true);
        self.fw_write(Method::DELETE, path(scope, Some(name), None), params)
            .await
    }

    /// `GET .../ipset/{name}`: its entries.
    pub async fn ip_set_entries(&self, scope: Scope<'_>, name: &str) -> Result<Vec<Entry>> {
        self.get(path(scope, Some(name), None), Params::new()).await
    }

    /// `POST .../ipset/{name}`: a new entry.
    pub async fn add_ip_set_entry(
        &self,
        scope: Scope<'_>,
        name: &str,
        cidr: &str,
        nomatch: bool,
        comment: Option<&str>,
    ) -> Result<()> {
        let params = Params::new()
            .text("cidr", cidr)
            .opt_flag("nomatch", nomatch.then_some(true))
            .opt("comment", comment);
        self.fw_write(Method::POST, path(scope, Some(name), None), params)
            .await
    }

    /// `PUT .../ipset/{name}/{cidr}`: `nomatch` and `comment` as given, if
    /// the list still has `digest`.
    pub async fn set_ip_set_entry(
        &self,
        scope: Scope<'_>,
        name: &str,
        cidr: &str,
        nomatch: bool,
        comment: Option<&str>,
        digest: &str,
    ) -> Result<()> {
        let params = Params::new()
            .opt_flag("nomatch", nomatch.then_some(true))
            .opt("comment", comment)
            .text("digest", digest);
        self.fw_write(Method::PUT, path(scope, Some(name), Some(cidr)), params)
            .await
    }

    /// `DELETE .../ipset/{name}/{cidr}`, if the list still has `digest`.
    pub async fn delete_ip_set_entry(
        &self,
        scope: Scope<'_>,
        name: &str,
        cidr: &str,
        digest: &str,
    ) -> Result<()> {
        let params = Params::new().text("digest", digest);
        self.fw_write(Method::DELETE, path(scope, Some(name), Some(cidr)), params)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_the_scope() {
        let ct = Guest {
            kind: GuestType::Lxc,
            node: "pve".into(),
            vmid: 200,
        };
        assert_eq!(
            path(Scope::Guest(&ct), Some("web"), Some("10.0.0.0/8")).rendered,
            "/nodes/pve/lxc/200/firewall/ipset/web/10.0.0.0%2F8"
        );
        assert_eq!(
            path(Scope::Cluster, Some("web"), None).rendered,
            "/cluster/firewall/ipset/web"
        );
        assert_eq!(
            path(Scope::Cluster, None, None).rendered,
            "/cluster/firewall/ipset"
        );
    }
}
