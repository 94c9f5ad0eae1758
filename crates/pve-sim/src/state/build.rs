//! A cluster from a state file, and the state file of a cluster.

use std::collections::BTreeMap;

use super::file::{
    AclEntry, GuestSpec, HaSpec, NodeSpec, PoolSpec, Size, StateFile, StorageSpec, TokenEntry,
    UserEntry, Values, VolumeSpec,
};
use super::ha::{HaResource, HaSection};
use super::{Cluster, GuestKind, Pool, Running, Storage, StorageKind, Vm, Volume, seed};
use crate::clock::Clock;
use crate::config::SimConfig;
use crate::error::Error;
use crate::schema::format::{CONTENT_TYPES, parse_size};

/// The cluster a state file describes; `config` already holds its nodes.
pub fn cluster(file: &StateFile, config: &SimConfig) -> Result<Cluster, Error> {
    let mut cluster = seed::cluster(config);
    let bad = |msg: String| Error::Config(format!("state file: {msg}"));
    for (n, spec) in cluster.nodes.iter_mut().zip(&file.nodes) {
        n.online = spec.online;
    }
    if let Some(storages) = &file.storages {
        cluster.storages.clear();
        for node in cluster.node_names() {
            let mine = storages
                .iter()
                .filter(|s| s.nodes.as_ref().is_none_or(|n| n.contains(&node)));
            let list = mine
                .map(storage)
                .collect::<Result<Vec<_>, _>>()
                .map_err(bad)?;
            cluster.storages.insert(node, list);
        }
    }
    for v in &file.volumes {
        add_volume(&mut cluster, v).map_err(bad)?;
    }
    if let Some(guests) = &file.guests {
        cluster.vms.clear();
        for g in guests {
            add_guest(&mut cluster, g).map_err(bad)?;
        }
    }
    for p in &file.pools {
        cluster.pools.insert(
            p.id.clone(),
            Pool {
                comment: p.comment.clone(),
                storage: p.storage.iter().cloned().collect(),
            },
        );
    }
    cluster.options = file.options.clone();
    for (sid, values) in &file.ha.resources {
        let mut options = values.0.clone();
        let state = options.remove("state").unwrap_or_else(|| "started".into());
        cluster
            .ha
            .resources
            .insert(sid.clone(), HaResource { state, options });
    }
    for (target, source) in [
        (&mut cluster.ha.rules, &file.ha.rules),
        (&mut cluster.ha.groups, &file.ha.groups),
    ] {
        for (id, values) in source {
            let mut options = values.0.clone();
            let kind = options.remove("type").unwrap_or_else(|| "group".into());
            target.insert(id.clone(), HaSection { kind, options });
        }
    }
    Ok(cluster)
}

fn storage(s: &StorageSpec) -> Result<Storage, String> {
    let kind = match s.kind.as_str() {
        "dir" => StorageKind::Dir {
            path: s
                .path
                .clone()
                .unwrap_or_else(|| format!("/mnt/pve/{}", s.id)),
        },
        "lvmthin" => StorageKind::LvmThin {
            vg: s.vg.clone().unwrap_or_else(|| "pve".into()),
        },
        other => return Err(format!("storage '{}': unknown type '{other}'", s.id)),
    };
    let content = s
        .content
        .iter()
        .map(|c| {
            CONTENT_TYPES
                .iter()
                .copied()
                .find(|t| t == c)
                .ok_or_else(|| format!("storage '{}': unknown content '{c}'", s.id))
        })
        .collect::<Result<_, _>>()?;
    Ok(Storage {
        id: s.id.clone(),
        kind,
        content,
        total: s.size.0,
        shared: s.shared,
        volumes: BTreeMap::new(),
    })
}

fn content_of(volname: &str) -> &'static str {
    match crate::api::qemu::disks::volume_type(volname) {
        "iso" => "iso",
        "vztmpl" => "vztmpl",
        "import" => "import",
        "snippets" => "snippets",
        "backup" => "backup",
        _ => "images",
    }
}

fn add_volume(cluster: &mut Cluster, v: &VolumeSpec) -> Result<(), String> {
    let (sid, name) = v
        .volid
        .split_once(':')
        .ok_or_else(|| format!("volume '{}' is not STORAGE:NAME", v.volid))?;
    let first = cluster
        .nodes
        .first()
        .map(|n| n.name.clone())
        .unwrap_or_default();
    let nodes: Vec<String> = match &v.node {
        Some(n) => vec![n.clone()],
        None if cluster.storage(&first, sid).is_some_and(|s| s.shared) => cluster.node_names(),
        None => vec![first],
    };
    let content = content_of(name);
    let format = v.format.clone().unwrap_or_else(|| {
        name.rsplit_once('.')
            .map_or("raw", |(_, ext)| if content == "iso" { "iso" } else { ext })
            .to_owned()
    });
    for node in nodes {
        let s = cluster
            .storage_mut(&node, sid)
            .ok_or_else(|| format!("volume '{}': no storage '{sid}' on '{node}'", v.volid))?;
        s.volumes.insert(
            name.to_owned(),
            Volume {
                volname: name.to_owned(),
                content,
                format: format.clone(),
                size: v.size.0,
                virtual_size: v.virtual_size.map_or(v.size.0, |s| s.0),
                vmid: v.vmid,
                ctime: Clock::epoch_secs(),
                corrupt: v.corrupt,
                checksums: BTreeMap::new(),
                base: v.base.clone(),
                contents: v.contents.clone(),
                backup: None,
            },
        );
    }
    Ok(())
}

fn add_guest(cluster: &mut Cluster, g: &GuestSpec) -> Result<(), String> {
    let node = g
        .node
        .clone()
        .or_else(|| cluster.nodes.first().map(|n| n.name.clone()))
        .unwrap_or_default();
    if !cluster.has_node(&node) {
        return Err(format!("guest {}: no node '{node}'", g.vmid));
    }
    let mut vm = Vm::new(g.vmid, &node, g.config.0.clone());
    vm.kind = match g.kind.as_str() {
        "qemu" => GuestKind::Qemu,
        "lxc" => GuestKind::Lxc,
        other => return Err(format!("guest {}: unknown type '{other}'", g.vmid)),
    };
    vm.created = None;
    vm.pool = g.pool.clone();
    if g.running {
        vm.running = Some(Running {
            pid: 100_000 + g.vmid % 100_000,
            since: tokio::time::Instant::now(),
            since_epoch: Clock::epoch_secs(),
            agent_ready: tokio::time::Instant::now(),
        });
    }
    // Disks the file names but does not list as volumes exist with their size.
    let disks: Vec<(String, u64)> = vm
        .config
        .iter()
        .filter(|(k, _)| crate::schema::qemu::is_drive(k) || *k == "rootfs" || k.starts_with("mp"))
        .filter(|(_, v)| !v.contains("media=cdrom"))
        .filter_map(|(_, v)| {
            let mut parts = v.split(',');
            let volid = parts.next()?.to_owned();
            let size = parts
                .find_map(|p| p.strip_prefix("size="))
                .and_then(parse_size)
                .unwrap_or(4 << 30);
            volid.contains(':').then_some((volid, size))
        })
        .collect();
    for (volid, size) in disks {
        if cluster.volume(&node, &volid).is_none() {
            let spec = VolumeSpec {
                volid,
                node: Some(node.clone()),
                size: Size(size),
                virtual_size: None,
                format: None,
                vmid: Some(g.vmid),
                corrupt: false,
                base: None,
                contents: None,
            };
            add_volume(cluster, &spec)?;
        }
    }
    cluster.vms.insert(g.vmid, vm);
    Ok(())
}

/// The state file of a cluster (and the accounts of its configuration);
/// passwords and token secrets only with `secrets`.
pub fn export(cluster: &Cluster, config: &SimConfig, secrets: bool) -> StateFile {
    let nodes = cluster
        .nodes
        .iter()
        .map(|n| NodeSpec {
            name: n.name.clone(),
            memory: Some(Size(n.memory)),
            cpus: Some(n.cpus),
            online: n.online,
        })
        .collect();
    let mut storages: Vec<StorageSpec> = Vec::new();
    let mut volumes = Vec::new();
    let all = cluster.node_names();
    for (node, list) in &cluster.storages {
        for s in list {
            match storages.iter_mut().find(|x| x.id == s.id) {
                Some(spec) => spec.nodes.get_or_insert_with(Vec::new).push(node.clone()),
                None => storages.push(storage_spec(s, node)),
            }
            if s.shared && cluster.shared_home(&s.id) != Some(node.as_str()) {
                continue;
            }
            for v in s.volumes.values() {
                volumes.push(VolumeSpec {
                    volid: s.volid(&v.volname),
                    node: (!s.shared).then(|| node.clone()),
                    size: Size(v.size),
                    virtual_size: (v.virtual_size != v.size).then_some(Size(v.virtual_size)),
                    format: Some(v.format.clone()),
                    vmid: v.vmid,
                    corrupt: v.corrupt,
                    base: v.base.clone(),
                    contents: v.contents.clone(),
                });
            }
        }
    }
    for s in &mut storages {
        if s.nodes.as_ref().is_some_and(|n| n.len() == all.len()) {
            s.nodes = None;
        }
    }
    let guests = cluster
        .vms
        .values()
        .map(|vm| GuestSpec {
            vmid: vm.vmid,
            kind: vm.kind.type_name().into(),
            node: Some(vm.node.clone()),
            config: Values(vm.config.clone()),
            running: vm.is_running(),
            pool: vm.pool.clone(),
        })
        .collect();
    let pools = cluster
        .pools
        .iter()
        .map(|(id, p)| PoolSpec {
            id: id.clone(),
            comment: p.comment.clone(),
            storage: p.storage.iter().cloned().collect(),
        })
        .collect();
    let mut ha = HaSpec::default();
    for (sid, r) in &cluster.ha.resources {
        let mut values = r.options.clone();
        values.insert("state".into(), r.state.clone());
        ha.resources.insert(sid.clone(), Values(values));
    }
    for (target, source) in [
        (&mut ha.rules, &cluster.ha.rules),
        (&mut ha.groups, &cluster.ha.groups),
    ] {
        for (id, s) in source {
            let mut values = s.options.clone();
            values.insert("type".into(), s.kind.clone());
            target.insert(id.clone(), Values(values));
        }
    }
    StateFile {
        pve_version: Some(config.pve_version),
        nodes,
        storages: Some(storages),
        volumes,
        guests: Some(guests),
        pools,
        options: cluster.options.clone(),
        ha,
        users: config
            .users
            .iter()
            .map(|u| UserEntry {
                user: u.user.clone(),
                password: secrets.then(|| u.password.expose().to_owned()),
            })
            .collect(),
        tokens: config
            .api_tokens
            .iter()
            .map(|t| TokenEntry {
                id: t.full_id(),
                secret: secrets.then(|| t.secret.expose().to_owned()),
            })
            .collect(),
        acl: config
            .grants
            .iter()
            .map(|g| AclEntry {
                subject: g.subject.clone(),
                path: g.path.clone(),
                roles: g.roles.clone(),
            })
            .collect(),
    }
}

fn storage_spec(s: &Storage, node: &str) -> StorageSpec {
    let (kind, path, vg) = match &s.kind {
        StorageKind::Dir { path } => ("dir", Some(path.clone()), None),
        StorageKind::LvmThin { vg } => ("lvmthin", None, Some(vg.clone())),
    };
    StorageSpec {
        id: s.id.clone(),
        kind: kind.into(),
        path,
        vg,
        content: s.content.iter().map(|c| (*c).to_owned()).collect(),
        size: Size(s.total),
        shared: s.shared,
        nodes: Some(vec![node.to_owned()]),
    }
}

/// Applies a state file's nodes, version and accounts to a configuration.
pub fn configure(file: &StateFile, config: &mut SimConfig) -> Result<(), Error> {
    if let Some(v) = file.pve_version {
        config.pve_version = v;
    }
    if !file.nodes.is_empty() {
        config.nodes = file.nodes.iter().map(|n| n.name.clone()).collect();
        for n in &file.nodes {
            if let Some(m) = n.memory {
                config.node_memory.insert(n.name.clone(), m.0);
            }
            if let Some(c) = n.cpus {
                config.node_cpus.insert(n.name.clone(), c);
            }
        }
    }
    let missing =
        |what: &str, id: &str| Error::Config(format!("state file: {what} '{id}' needs its secret"));
    // The file's accounts replace same-named ones of the configuration.
    for u in &file.users {
        let password = u
            .password
            .as_ref()
            .ok_or_else(|| missing("user", &u.user))?;
        config.users.retain(|x| x.user != u.user);
        config.users.push(format!("{}:{password}", u.user).parse()?);
    }
    for t in &file.tokens {
        let secret = t.secret.as_ref().ok_or_else(|| missing("token", &t.id))?;
        config.api_tokens.retain(|x| x.full_id() != t.id);
        config
            .api_tokens
            .push(format!("{}={secret}", t.id).parse()?);
    }
    for a in &file.acl {
        let grant: crate::config::Grant =
            format!("{}:{}:{}", a.subject, a.path, a.roles.join(",")).parse()?;
        config.grants.retain(|g| *g != grant);
        config.grants.push(grant);
    }
    Ok(())
}
