use super::*;

fn resource(kind: &str, vmid: u64, node: &str, name: Option<&str>) -> Resource {
    serde_json::from_value(json!({
        "id": format!("{kind}/{vmid}"),
        "type": kind,
        "vmid": vmid,
        "node": node,
        "name": name,
    }))
    .unwrap()
}

fn cluster() -> Vec<Resource> {
    let mut web = resource("qemu", 101, "pve1", Some("web-1"));
    web.tags = Some("prod;web".into());
    web.pool = Some("team-a".into());
    let mut db = resource("qemu", 102, "pve2", Some("db-1"));
    db.tags = Some("prod".into());
    let mut tpl = resource("qemu", 9000, "pve1", Some("debian-tpl"));
    tpl.template = true;
    vec![
        db,
        web,
        tpl,
        resource("lxc", 200, "pve1", Some("cache")),
        resource("node", 0, "pve1", None),
        resource("storage", 0, "pve1", None),
    ]
}

fn all() -> Filter {
    Filter {
        node: None,
        pool: None,
        tags: vec![],
        name: None,
        kinds: Kinds::All,
        templates: false,
    }
}

#[test]
fn the_filters_choose_the_guests() {
    let cases: [(&str, Filter, &[u32]); 9] = [
        ("every guest but templates", all(), &[101, 102, 200]),
        (
            "templates too",
            Filter {
                templates: true,
                ..all()
            },
            &[101, 102, 200, 9000],
        ),
        (
            "one node",
            Filter {
                node: Some("pve2".into()),
                ..all()
            },
            &[102],
        ),
        (
            "a pool",
            Filter {
                pool: Some("team-a".into()),
                ..all()
            },
            &[101],
        ),
        (
            "every tag named",
            Filter {
                tags: vec!["prod".into(), "web".into()],
                ..all()
            },
            &[101],
        ),
        (
            "a tag, any case",
            Filter {
                tags: vec!["PROD".into()],
                ..all()
            },
            &[101, 102],
        ),
        (
            "a name glob",
            Filter {
                name: Some("*-1".into()),
                ..all()
            },
            &[101, 102],
        ),
        (
            "containers only",
            Filter {
                kinds: Kinds::Containers,
                ..all()
            },
            &[200],
        ),
        (
            "VMs only",
            Filter {
                kinds: Kinds::Vms,
                ..all()
            },
            &[101, 102],
        ),
    ];
    for (name, filter, want) in cases {
        let got: Vec<u32> = select(&cluster(), &filter).iter().map(|g| g.vmid).collect();
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn globs_match_as_shells_do() {
    let cases = [
        ("web-*", "web-1", true),
        ("web-*", "db-1", false),
        ("*", "", true),
        ("w?b*", "web-2", true),
        ("*-1", "web-10", false),
        ("a*b*c", "axxbyyc", true),
        ("a*b*c", "axxbyy", false),
        ("exact", "exact", true),
        ("", "x", false),
    ];
    for (glob, text, want) in cases {
        assert_eq!(glob_matches(glob, text), want, "{glob} ~ {text}");
    }
}

#[test]
fn each_guest_becomes_an_observe_only_manifest() {
    let mut guests = select(&cluster(), &all());
    guests[2].rootfs = Some(("local-lvm".into(), 8 << 30));
    let target = Target {
        namespace: "imports".into(),
        config_kind: ProviderConfigKind::ClusterProviderConfig,
        config_name: "default".into(),
    };
    let docs = manifests(&guests, &target);
    let files: Vec<&str> = docs.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        files,
        [
            "proxmoxvm-web-1.yaml",
            "proxmoxvm-db-1.yaml",
            "proxmoxcontainer-cache.yaml"
        ]
    );
    let (_, vm) = &docs[0];
    assert_eq!(vm["kind"], "ProxmoxVM");
    assert_eq!(vm["metadata"]["namespace"], "imports");
    assert_eq!(vm["metadata"]["annotations"][EXTERNAL_NAME], "101");
    assert_eq!(vm["spec"]["managementPolicies"], json!(["Observe"]));
    assert_eq!(
        vm["spec"]["providerConfigRef"],
        json!({"kind": "ClusterProviderConfig", "name": "default"})
    );
    let (_, ct) = &docs[2];
    assert_eq!(ct["kind"], "ProxmoxContainer");
    assert_eq!(
        ct["spec"]["forProvider"]["rootfs"],
        json!({"storage": "local-lvm", "size": "8Gi"})
    );
    let yaml = to_yaml(vm).unwrap();
    assert!(
        yaml.contains("crossplane.io/external-name: '101'")
            || yaml.contains("crossplane.io/external-name: \"101\""),
        "{yaml}"
    );
}

#[test]
fn names_are_dns_labels_and_unique_per_kind() {
    let guest = |container, vmid, name: Option<&str>| Guest {
        container,
        vmid,
        node: "pve".into(),
        name: name.map(Into::into),
        rootfs: None,
        managed_by: None,
    };
    let guests = [
        guest(false, 100, Some("Web_Server.01")),
        guest(false, 101, Some("dup")),
        guest(false, 102, Some("dup")),
        guest(true, 103, Some("dup")),
        guest(false, 104, None),
        guest(true, 105, Some("---")),
    ];
    assert_eq!(
        resource_names(&guests),
        [
            "web-server-01",
            "dup-101",
            "dup-102",
            "dup",
            "vm-104",
            "ct-105"
        ]
    );
}

#[test]
fn guests_another_resource_manages_are_left_out_unless_asked_for() {
    let guest = |vmid, managed_by: Option<&str>| Guest {
        container: false,
        vmid,
        node: "pve".into(),
        name: None,
        rootfs: None,
        managed_by: managed_by.map(Into::into),
    };
    let guests = vec![
        guest(100, None),
        guest(101, Some("ProxmoxVM a/web uid=1")),
        guest(102, None),
    ];
    let vmids = |gs: &[Guest]| gs.iter().map(|g| g.vmid).collect::<Vec<_>>();
    let (chosen, left_out) = unmanaged(guests.clone(), false);
    assert_eq!(
        (vmids(&chosen), vmids(&left_out)),
        (vec![100, 102], vec![101])
    );
    let (chosen, left_out) = unmanaged(guests, true);
    assert_eq!(
        (vmids(&chosen), vmids(&left_out)),
        (vec![100, 101, 102], vec![])
    );
}
