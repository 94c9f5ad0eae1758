//! Request parameters of container calls and the property strings inside
//! them, after pve-container's `LXC/Config.pm` formats (checked against the
//! PVE 9.1 API schema): `rootfs`/`mpN` (`STORAGE:SIZE_GiB` for a new
//! volume), `netN`, `features`.

use std::collections::BTreeMap;
use std::fmt;

use crate::form::Params;
use crate::secret::Secret;
use crate::vm::Tags;

/// A property string read into its keys (`k=v,k=v`); a part without `=` is
/// kept under the format's default key.
fn split_props(value: &str, default_key: &str) -> BTreeMap<String, String> {
    value
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|part| match part.split_once('=') {
            Some((k, v)) => (k.trim().to_owned(), v.trim().to_owned()),
            None => (default_key.to_owned(), part.trim().to_owned()),
        })
        .collect()
}

/// A new volume: `rootfs` or `mpN` as the create call takes it
/// (`STORAGE:SIZE_GiB`, with `mp=PATH` for a mount point).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerVolume {
    /// Storage ID.
    pub storage: String,
    /// Whole GiB (PVE allocates new container volumes in GiB).
    pub size_gib: u64,
    /// Mount path inside the container (`mpN` only).
    pub path: Option<String>,
}

impl fmt::Display for ContainerVolume {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.storage, self.size_gib)?;
        if let Some(path) = &self.path {
            write!(f, ",mp={path}")?;
        }
        Ok(())
    }
}

impl ContainerVolume {
    /// The storage of an observed `rootfs`/`mpN` volume
    /// (`local-lvm:vm-100-disk-0,size=8G` → `local-lvm`); `None` for a
    /// bind mount (an absolute path).
    pub fn observed_storage(value: &str) -> Option<String> {
        let volume = split_props(value, "volume").remove("volume")?;
        let (storage, _) = volume.split_once(':')?;
        (!storage.is_empty() && !storage.starts_with('/')).then(|| storage.to_owned())
    }

    /// The size in bytes of an observed `rootfs`/`mpN` (`size=8G`).
    pub fn observed_size(value: &str) -> Option<u64> {
        split_props(value, "volume")
            .get("size")
            .and_then(|s| crate::vm::parse_size(s))
    }

    /// Where an observed `mpN` is mounted inside the container (`mp=/data`).
    pub fn observed_path(value: &str) -> Option<String> {
        split_props(value, "volume").remove("mp")
    }
}

/// `netN` of a container (`LXC/Config.pm` `$netconf_desc`). Only the keys
/// the provider manages; others observed (`hwaddr`, `type`, `mtu`, ...) are
/// kept when the value is written back (see [`ContainerNet::merged_with`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerNet {
    /// Interface name inside the container (`eth0`).
    pub name: String,
    pub bridge: Option<String>,
    /// VLAN tag.
    pub tag: Option<u16>,
    /// `dhcp`, `manual` or an IPv4 CIDR.
    pub ip: Option<String>,
    /// IPv4 gateway.
    pub gw: Option<String>,
    /// `dhcp`, `auto`, `manual` or an IPv6 CIDR.
    pub ip6: Option<String>,
    pub firewall: Option<bool>,
}

impl ContainerNet {
    /// Reads an observed `netN` (the keys this model has; `tag` or
    /// `firewall` that do not parse are left out).
    pub fn parse(value: &str) -> Self {
        let mut keys = split_props(value, "name");
        Self {
            name: keys.remove("name").unwrap_or_default(),
            bridge: keys.remove("bridge"),
            tag: keys.remove("tag").and_then(|t| t.parse().ok()),
            ip: keys.remove("ip"),
            gw: keys.remove("gw"),
            ip6: keys.remove("ip6"),
            firewall: keys.remove("firewall").map(|f| f == "1"),
        }
    }

    fn managed(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        m.insert("name".to_owned(), self.name.clone());
        let mut put = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                m.insert(k.to_owned(), v);
            }
        };
        put("bridge", self.bridge.clone());
        put("tag", self.tag.map(|t| t.to_string()));
        put("ip", self.ip.clone());
        put("gw", self.gw.clone());
        put("ip6", self.ip6.clone());
        put("firewall", self.firewall.map(|f| u8::from(f).to_string()));
        m
    }

    /// Whether an observed `netN` says what this one does: every managed
    /// key equal, none of them set there when not wanted (a generated
    /// `hwaddr` and the `type` PVE adds are not the provider's).
    pub fn matches(&self, observed: &str) -> bool {
        let seen = split_props(observed, "name");
        let want = self.managed();
        let keys = ["name", "bridge", "tag", "ip", "gw", "ip6", "firewall"];
        keys.iter().all(|k| {
            let seen = seen.get(*k).map(String::as_str);
            let seen = match (*k, seen) {
                ("firewall", Some("0")) => None,
                (_, s) => s,
            };
            let want = match (*k, want.get(*k).map(String::as_str)) {
                ("firewall", Some("0")) => None,
                (_, w) => w,
            };
            seen == want
        })
    }

    /// This NIC as a value to write over `observed`: the managed keys from
    /// here, the rest (`hwaddr`, so the MAC stays; `type`, `mtu`, ...)
    /// from there.
    pub fn merged_with(&self, observed: Option<&str>) -> String {
        let mut keys = observed.map(|o| split_props(o, "name")).unwrap_or_default();
        for k in ["bridge", "tag", "ip", "gw", "ip6", "firewall"] {
            keys.remove(k);
        }
        keys.extend(self.managed());
        join_props(&keys)
    }
}

impl fmt::Display for ContainerNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&join_props(&self.managed()))
    }
}

/// `name` first (the key PVE requires), then the others sorted.
fn join_props(keys: &BTreeMap<String, String>) -> String {
    let mut parts: Vec<String> = keys
        .get("name")
        .map(|n| format!("name={n}"))
        .into_iter()
        .collect();
    parts.extend(
        keys.iter()
            .filter(|(k, _)| k.as_str() != "name")
            .map(|(k, v)| format!("{k}={v}")),
    );
    parts.join(",")
}

/// `features` (`LXC/Config.pm` `$features_desc`): the three the provider
/// manages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features {
    pub nesting: bool,
    pub keyctl: bool,
    pub fuse: bool,
}

impl Features {
    /// Reads an observed `features` value (absent keys are off, PVE's
    /// default).
    pub fn parse(value: &str) -> Self {
        let keys = split_props(value, "");
        let on = |k: &str| keys.get(k).is_some_and(|v| v == "1");
        Self {
            nesting: on("nesting"),
            keyctl: on("keyctl"),
            fuse: on("fuse"),
        }
    }

    /// No feature on: the value is left out (PVE's default).
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

impl fmt::Display for Features {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<&str> = [
            (self.fuse, "fuse=1"),
            (self.keyctl, "keyctl=1"),
            (self.nesting, "nesting=1"),
        ]
        .into_iter()
        .filter_map(|(on, s)| on.then_some(s))
        .collect();
        f.write_str(&parts.join(","))
    }
}

/// `POST /nodes/{node}/lxc`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CreateContainer {
    pub vmid: u32,
    /// The template volume (`local:vztmpl/...tar.zst`, or the `.tar` of an
    /// OCI pull).
    pub ostemplate: String,
    pub rootfs: Option<ContainerVolume>,
    /// `mpN` → the new volume.
    pub mount_points: BTreeMap<u32, ContainerVolume>,
    pub hostname: Option<String>,
    pub cores: Option<u32>,
    /// MiB.
    pub memory: Option<u64>,
    /// MiB.
    pub swap: Option<u64>,
    pub unprivileged: bool,
    pub features: Features,
    /// `netN` by index.
    pub nets: BTreeMap<u32, ContainerNet>,
    /// Space-separated, as PVE takes it.
    pub nameserver: Option<String>,
    pub searchdomain: Option<String>,
    /// OpenSSH public keys, one per line.
    pub ssh_public_keys: Vec<String>,
    /// The root password (sent once, at create; never logged).
    pub password: Option<Secret>,
    pub onboot: Option<bool>,
    pub tags: Tags,
    pub description: Option<String>,
    pub pool: Option<String>,
}

impl CreateContainer {
    /// The form, as the create call takes it.
    pub fn to_params(&self) -> Params {
        let mut p = Params::new()
            .text("vmid", self.vmid)
            .text("ostemplate", &self.ostemplate)
            .opt("rootfs", self.rootfs.as_ref())
            .opt("hostname", self.hostname.as_ref())
            .opt("cores", self.cores)
            .opt("memory", self.memory)
            .opt("swap", self.swap)
            .flag("unprivileged", self.unprivileged)
            .opt("nameserver", self.nameserver.as_ref())
            .opt("searchdomain", self.searchdomain.as_ref())
            .opt_flag("onboot", self.onboot)
            .opt("description", self.description.as_ref())
            .opt("pool", self.pool.as_ref());
        if !self.features.is_empty() {
            p = p.text("features", self.features);
        }
        for (i, mp) in &self.mount_points {
            p = p.text(&format!("mp{i}"), mp);
        }
        for (i, net) in &self.nets {
            p = p.text(&format!("net{i}"), net);
        }
        if !self.ssh_public_keys.is_empty() {
            p = p.text("ssh-public-keys", self.ssh_public_keys.join("\n"));
        }
        if !self.tags.is_empty() {
            p = p.text("tags", &self.tags);
        }
        if let Some(password) = &self.password {
            p = p.secret("password", password);
        }
        p
    }
}

/// `PUT /nodes/{node}/lxc/{vmid}/config`: keys to set and to delete.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerUpdate {
    /// Key → value, as the config takes them.
    pub set: BTreeMap<String, String>,
    /// Keys to remove (back to PVE's default).
    pub delete: Vec<String>,
    /// The digest the update is based on: PVE refuses it if the config
    /// changed since.
    pub digest: Option<String>,
}

impl ContainerUpdate {
    /// Nothing to change.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.delete.is_empty()
    }

    pub(crate) fn to_params(&self) -> Params {
        let mut p = Params::new();
        for (k, v) in &self.set {
            p = p.text(k, v);
        }
        if !self.delete.is_empty() {
            p = p.text("delete", self.delete.join(","));
        }
        p.opt("digest", self.digest.as_ref())
    }
}

/// `POST /nodes/{node}/storage/{storage}/oci-registry-pull` (PVE 9.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OciPull {
    /// `registry/name:tag` (the schema's pattern requires a tag).
    pub reference: String,
    /// The file name before PVE normalises it and appends `.tar`.
    pub filename: String,
}

impl OciPull {
    /// The volume the pull leaves: `<storage>:vztmpl/<normalised name>.tar`.
    pub fn volume(&self, storage: &str) -> String {
        format!("{storage}:vztmpl/{}", oci_file_name(&self.filename))
    }

    pub(crate) fn to_params(&self) -> Params {
        Params::new()
            .text("reference", &self.reference)
            .text("filename", &self.filename)
    }
}

/// The file an OCI pull of `filename` writes: pve-storage's
/// `normalize_content_filename` (the last path part, every character but
/// `[a-zA-Z0-9_.-]` replaced by `_`) with `.tar` appended.
pub fn oci_file_name(filename: &str) -> String {
    let base = filename
        .trim_end_matches('\n')
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or_default();
    let normal: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{normal}.tar")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_form_holds_every_set_parameter_and_the_password_as_a_secret() {
        let create = CreateContainer {
            vmid: 120,
            ostemplate: "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst".into(),
            rootfs: Some(ContainerVolume {
                storage: "local-lvm".into(),
                size_gib: 8,
                path: None,
            }),
            mount_points: [(
                0,
                ContainerVolume {
                    storage: "local-lvm".into(),
                    size_gib: 2,
                    path: Some("/data".into()),
                },
            )]
            .into(),
            cores: Some(2),
            memory: Some(1024),
            swap: Some(0),
            unprivileged: true,
            features: Features {
                nesting: true,
                ..Features::default()
            },
            nets: [(
                0,
                ContainerNet {
                    name: "eth0".into(),
                    bridge: Some("vmbr0".into()),
                    ip: Some("dhcp".into()),
                    ..ContainerNet::default()
                },
            )]
            .into(),
            ssh_public_keys: vec!["ssh-ed25519 AAAA a".into(), "ssh-ed25519 BBBB b".into()],
            password: Some(Secret::new("hunter22")),
            ..CreateContainer::default()
        };
        let p = create.to_params();
        assert_eq!(p.get("rootfs"), Some("local-lvm:8"));
        assert_eq!(p.get("mp0"), Some("local-lvm:2,mp=/data"));
        assert_eq!(p.get("net0"), Some("name=eth0,bridge=vmbr0,ip=dhcp"));
        assert_eq!(p.get("features"), Some("nesting=1"));
        assert_eq!(p.get("unprivileged"), Some("1"));
        assert_eq!(p.get("swap"), Some("0"));
        assert_eq!(
            p.get("ssh-public-keys"),
            Some("ssh-ed25519 AAAA a\nssh-ed25519 BBBB b")
        );
        assert_eq!(p.get("password"), Some("hunter22"));
        assert_eq!(p.secrets().len(), 1, "the password is marked secret");
        assert_eq!(p.get("tags"), None);
    }

    #[test]
    fn a_nic_matches_what_pve_shows_back_and_keeps_its_mac_when_rewritten() {
        let net = ContainerNet {
            name: "eth0".into(),
            bridge: Some("vmbr0".into()),
            tag: Some(10),
            ip: Some("10.0.0.5/24".into()),
            gw: Some("10.0.0.1".into()),
            ..ContainerNet::default()
        };
        let seen = "name=eth0,bridge=vmbr0,gw=10.0.0.1,hwaddr=BC:24:11:00:00:01,ip=10.0.0.5/24,tag=10,type=veth";
        assert!(net.matches(seen));
        assert!(!net.matches(&seen.replace("tag=10", "tag=11")));
        assert!(!net.matches(&format!("{seen},firewall=1")));
        let moved = ContainerNet {
            bridge: Some("vmbr1".into()),
            ..net
        };
        assert_eq!(
            moved.merged_with(Some(seen)),
            "name=eth0,bridge=vmbr1,gw=10.0.0.1,hwaddr=BC:24:11:00:00:01,ip=10.0.0.5/24,tag=10,type=veth"
        );
    }

    #[test]
    fn an_observed_nic_and_volume_read_back() {
        let nic = ContainerNet::parse(
            "name=eth0,bridge=vmbr0,firewall=1,gw=10.0.0.1,hwaddr=BC:24:11:00:00:01,ip=10.0.0.5/24,tag=20,type=veth",
        );
        assert_eq!(
            nic,
            ContainerNet {
                name: "eth0".into(),
                bridge: Some("vmbr0".into()),
                tag: Some(20),
                ip: Some("10.0.0.5/24".into()),
                gw: Some("10.0.0.1".into()),
                ip6: None,
                firewall: Some(true),
            }
        );
        assert!(nic.matches(&nic.to_string()));
        let cases = [
            ("local-lvm:vm-100-disk-0,size=8G", Some("local-lvm")),
            ("volume=tank:subvol-100-disk-0,size=8G", Some("tank")),
            ("/mnt/host,mp=/data", None),
            ("", None),
        ];
        for (value, want) in cases {
            assert_eq!(
                ContainerVolume::observed_storage(value).as_deref(),
                want,
                "{value}"
            );
        }
    }

    #[test]
    fn features_read_and_write_as_pve_does() {
        let f = Features::parse("keyctl=1,nesting=1");
        assert_eq!(
            f,
            Features {
                nesting: true,
                keyctl: true,
                fuse: false
            }
        );
        assert_eq!(f.to_string(), "keyctl=1,nesting=1");
        assert!(Features::parse("nesting=0").is_empty());
    }

    #[test]
    fn an_oci_pull_names_its_file_as_pve_storage_does() {
        assert_eq!(
            oci_file_name("docker.io/library/alpine:3.20"),
            "alpine_3.20.tar"
        );
        let pull = OciPull {
            reference: "docker.io/library/alpine:3.20".into(),
            filename: "alpine:3.20".into(),
        };
        assert_eq!(pull.volume("local"), "local:vztmpl/alpine_3.20.tar");
        assert_eq!(
            ContainerVolume::observed_size("local-lvm:vm-120-disk-0,size=8G"),
            Some(8 << 30)
        );
    }
}
