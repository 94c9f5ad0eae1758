//! A guest's own firewall aliases (`/nodes/{node}/{qemu|lxc}/{vmid}/
//! firewall/aliases`): a name for an address or network that the guest's
//! rules may name (`guest/<name>`). Plain calls that answer at once; a
//! change or removal carries the alias list's digest.

use reqwest::Method;
use serde::Deserialize;

use crate::client::Client;
use crate::error::Result;
use crate::form::Params;
use crate::request::ApiPath;
use crate::snapshot::{Guest, GuestType};

/// An alias, as listed.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Alias {
    /// As created (PVE keys aliases by the lowercased name).
    pub name: String,
    /// As PVE keeps it (`/32` and `/128` dropped).
    pub cidr: String,
    #[serde(default)]
    pub comment: Option<String>,
    /// The alias list's digest.
    #[serde(default)]
    pub digest: Option<String>,
}

fn path(guest: &Guest, name: Option<&str>) -> ApiPath {
    let vmid = guest.vmid.to_string();
    let template = match (guest.kind, name.is_some()) {
        (GuestType::Qemu, false) => "/nodes/{node}/qemu/{vmid}/firewall/aliases",
        (GuestType::Qemu, true) => "/nodes/{node}/qemu/{vmid}/firewall/aliases/{name}",
        (GuestType::Lxc, false) => "/nodes/{node}/lxc/{vmid}/firewall/aliases",
        (GuestType::Lxc, true) => "/nodes/{node}/lxc/{vmid}/firewall/aliases/{name}",
    };
    ApiPath::new(template, &[&guest.node, &vmid, name.unwrap_or_default()])
}

impl Client {
    /// `GET .../firewall/aliases`.
    pub async fn guest_aliases(&self, guest: &Guest) -> Result<Vec<Alias>> {
        self.get(path(guest, None), Params::new()).await
    }

    /// `POST .../firewall/aliases`: a new alias.
    pub async fn create_guest_alias(
        &self,
        guest: &Guest,
        name: &str,
        cidr: &str,
        comment: Option<&str>,
    ) -> Result<()> {
        let params = Params::new()
            .text("name", name)
            .text("cidr", cidr)
            .opt("comment", comment);
        self.fw_write(Method::POST, path(guest, None), params).await
    }

    /// `PUT .../firewall/aliases/{name}`: its address and comment (left
    /// out: removed), if the list still has `digest`.
    pub async fn set_guest_alias(
        &self,
        guest: &Guest,
        (name, cidr, comment): (&str, &str, Option<&str>),
        digest: Option<&str>,
    ) -> Result<()> {
        let params = Params::new()
            .text("cidr", cidr)
            .opt("comment", comment)
            .opt("digest", digest);
        self.fw_write(Method::PUT, path(guest, Some(name)), params)
            .await
    }

    /// `DELETE .../firewall/aliases/{name}`, if the list still has `digest`.
    pub async fn delete_guest_alias(
        &self,
        guest: &Guest,
        name: &str,
        digest: Option<&str>,
    ) -> Result<()> {
        let params = Params::new().opt("digest", digest);
        self.fw_write(Method::DELETE, path(guest, Some(name)), params)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_the_guest_and_the_alias() {
        let vm = Guest {
            kind: GuestType::Qemu,
            node: "pve".into(),
            vmid: 100,
        };
        assert_eq!(
            path(&vm, Some("gw")).rendered,
            "/nodes/pve/qemu/100/firewall/aliases/gw"
        );
    }
}
