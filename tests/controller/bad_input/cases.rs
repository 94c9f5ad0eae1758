//! The rows of the conditions table: objects and what each must end up
//! saying.

use pve_client::vm::{CreateVm, Drive, Tags, VmParams};
use serde_json::{Value, json};

use super::refused;
use super::reported::{
    Expect, config, config_says, config_warns, secret, vm_says, vm_using, vm_warns, vm_with,
};
use crate::reconcile::{Sim, manifests};

const FINGERPRINT: &str = "AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB";

/// Both the config and a VM that uses it say what is wrong.
/// The VM's message repeats the config's, except where Proxmox answered
/// (`vm_message`).
#[allow(clippy::too_many_arguments)]
fn config_and_user(
    objects: &mut Vec<Value>,
    expects: &mut Vec<Expect>,
    name: &str,
    pc: Value,
    reason: &'static str,
    message: &[&str],
    vm_message: Option<&[&str]>,
    or_event: bool,
) {
    let user = format!("uses-{name}");
    objects.push(pc);
    objects.push(vm_using(&user, name));
    let config = config_says(name, reason, message);
    expects.push(if or_event { config.or_event() } else { config });
    let mut says = vec!["cannot use the provider config", name];
    says.extend_from_slice(vm_message.unwrap_or(message));
    expects.push(vm_says(&user, "ReconcileError", &says));
}

/// Objects that do not match the CRD's types or rules: written while a
/// looser CRD was installed.
pub fn around_the_schema(sim: &Sim) -> (Vec<Value>, Vec<Expect>) {
    let mut objects = vec![];
    let mut expects = vec![];
    let unreadable = |name: &str, change: Value, field: &'static str, error: &'static str| {
        (
            vm_with(name, change),
            vm_says(
                name,
                "InvalidSpec",
                &[
                    "does not match the ProxmoxVM schema at",
                    field,
                    error,
                    "apply it again",
                ],
            ),
        )
    };
    for (object, expect) in [
        unreadable(
            "memory-number",
            json!({"memory": 4096}),
            "spec.forProvider.memory",
            "invalid type: integer `4096`, expected a string",
        ),
        unreadable(
            "power-hibernating",
            json!({"powerState": "Hibernating"}),
            "spec.forProvider.powerState",
            "unknown variant `Hibernating`",
        ),
        unreadable(
            "cores-text",
            json!({"cpu": {"cores": "two"}}),
            "spec.forProvider.cpu.cores",
            "invalid type: string \"two\"",
        ),
        unreadable(
            "disks-object",
            json!({"disks": {"slot": "scsi0"}}),
            "spec.forProvider.disks",
            "expected a sequence",
        ),
        unreadable(
            "disk-without-slot",
            json!({"disks": [{"storage": "local-lvm", "size": "1Gi"}]}),
            "spec.forProvider.disks[0]",
            "missing field `slot`",
        ),
        unreadable(
            "vmid-negative",
            json!({"vmid": -5}),
            "spec.forProvider.vmid",
            "invalid value: integer `-5`",
        ),
    ] {
        objects.push(object);
        expects.push(expect.or_event());
    }
    // Values of the right type that the CRD's rules would have refused.
    objects.push(vm_with("memory-lots", json!({"memory": "lots"})));
    expects.push(vm_says(
        "memory-lots",
        "InvalidSpec",
        &["memory", "\"lots\" is not a byte quantity"],
    ));
    // What one team may not reach: refused before anything is sent.
    let tenancy: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "forged-marker",
            json!({"description": refused::FORGED_NOTES}),
            vec![
                "spec.forProvider.description contains the owner marker",
                "the provider adds that line itself",
            ],
        ),
        (
            "serial-shadow",
            json!({"serialPorts": [{"slot": "serial0", "device": "/dev/../etc/shadow"}]}),
            vec![
                "spec.forProvider.serialPorts[0].device \"/dev/../etc/shadow\"",
                "neither socket nor a device name under /dev/",
            ],
        ),
        (
            "import-dot-dot",
            json!({"disks": [{"slot": "scsi0", "storage": "local-lvm", "importFrom": "local:import/../images/777/vm-777-disk-0.qcow2"}]}),
            vec![
                "spec.forProvider.disks[0].importFrom",
                "contains a .. path part",
            ],
        ),
    ];
    for (name, change, message) in tenancy {
        objects.push(vm_with(name, change));
        expects.push(vm_says(name, "InvalidSpec", &message));
    }
    let mut kind = vm_with("config-kind", json!({}));
    kind["spec"]["providerConfigRef"]["kind"] = json!("Other");
    objects.push(kind);
    expects.push(vm_says(
        "config-kind",
        "InvalidSpec",
        &["spec.providerConfigRef.kind", "unknown variant `Other`"],
    ));

    let configs = [
        (
            "endpoint-number",
            json!({"endpoint": 8006}),
            "InvalidConfig",
            vec![
                "does not match the ProviderConfig schema at spec.endpoint",
                "invalid type: integer `8006`",
            ],
        ),
        (
            "endpoint-ftp",
            json!({"endpoint": "ftp://pve.example.com"}),
            "InvalidConfig",
            vec!["endpoint \"ftp://pve.example.com\"", "must be https://"],
        ),
        (
            "endpoint-http",
            json!({"endpoint": "http://127.0.0.1:8006"}),
            "InvalidConfig",
            vec![
                "endpoint is http://: every request would carry the API token or password in clear",
                "set tls.insecureAllowPlainHTTP: true",
            ],
        ),
        (
            "resync-days",
            json!({"resyncInterval": "1d"}),
            "InvalidConfig",
            vec!["resyncInterval: \"1d\" is not a Go duration"],
        ),
        (
            "poll-negative",
            json!({"tasks": {"pollInterval": "1s-1s"}}),
            "InvalidConfig",
            vec!["tasks.pollInterval: \"1s-1s\" is not a Go duration"],
        ),
        (
            "fingerprint-short",
            json!({"tls": {"fingerprint": "AB:CD"}}),
            "TlsError",
            vec!["fingerprint", "AB:CD"],
        ),
        (
            "ca-not-pem",
            json!({"tls": {"caBundle": "not a certificate"}}),
            "TlsError",
            vec!["the CA bundle (tls.caBundle", "contains no PEM certificate"],
        ),
    ];
    for (name, change, reason, message) in configs {
        let pc = config(sim, name, change);
        config_and_user(
            &mut objects,
            &mut expects,
            name,
            pc,
            reason,
            &message,
            None,
            true,
        );
    }
    (objects, expects)
}

/// The import rows refused (nothing is imported, nothing created): the
/// default config's (no clonePolicy) and one outside its config's policy.
pub const IMPORT_REFUSED: [&str; 2] = ["import-by-default", "import-outside-policy"];

/// The import row its config's clonePolicy allows: it becomes Ready.
pub const IMPORTED_BY_POLICY: &str = "import-by-policy";

/// The VMs made by hand whose disks the import rows name: 778 tagged
/// `golden`, 777 tagged `db`, neither a template, each with a disk.
pub async fn import_sources(sim: &Sim) {
    let client = sim.client();
    for (vmid, tag) in [(778, "golden"), (777, "db")] {
        let create = CreateVm {
            vmid,
            params: VmParams {
                name: Some(format!("handmade-{vmid}")),
                memory: Some(512),
                tags: Some(Tags::new(vec![tag.to_owned()])),
                disks: [("scsi0".parse().unwrap(), Drive::alloc("local-lvm", 1))].into(),
                ..VmParams::default()
            },
            ..CreateVm::default()
        };
        let upid = client.create_vm("pve", &create).await.unwrap();
        client.wait_task(&upid).await.unwrap();
    }
}

/// Specs no VM can be made of on the simulator's nodes, the reason and
/// the message they end up with: nothing is created for any of them.
pub fn limit_rows() -> Vec<(&'static str, Value, &'static str, Vec<&'static str>)> {
    let ip = |ip: &str, gateway: &str| json!({"cloudInit": {"user": "ubuntu", "ipConfigs": [{"interface": "net0", "ip": ip, "gateway": gateway}]}});
    vec![
        (
            "vcpus-64",
            json!({"cpu": {"cores": 64}}),
            "ExceedsNodeLimits",
            vec![
                "spec.forProvider.cpu asks for 64 vCPUs (sockets 1 × cores 64) but node pve has 16 CPUs",
                "MAX 16 vcpus allowed per VM on this node",
                "nothing is created",
            ],
        ),
        (
            "memory-64ti",
            json!({"memory": "64Ti"}),
            "ExceedsNodeLimits",
            vec!["spec.forProvider.memory 64 TiB is more than node pve's 64 GiB of memory"],
        ),
        (
            "bridge-missing",
            json!({"networks": [{"slot": "net0", "bridge": "vmbr9"}]}),
            "BridgeNotFound",
            vec![
                "spec.forProvider.networks[0].bridge \"vmbr9\" is neither a bridge nor a VNet of node pve (it has vmbr0)",
                "bridge 'vmbr9' does not exist",
            ],
        ),
        (
            "ip-broadcast",
            ip("10.0.0.255/24", "10.0.0.1"),
            "InvalidSpec",
            vec![
                "spec.forProvider.cloudInit.ipConfigs[0].ip \"10.0.0.255/24\" is the broadcast address of its subnet",
            ],
        ),
        (
            "gateway-own",
            ip("10.0.0.5/24", "10.0.0.5"),
            "InvalidSpec",
            vec![
                "spec.forProvider.cloudInit.ipConfigs[0].gateway 10.0.0.5 is the VM's own address",
            ],
        ),
    ]
}

/// Objects the API server cannot judge: Secrets, CA bundles, what exists
/// on Proxmox.
pub fn provider_knows(sim: &Sim) -> (Vec<Value>, Vec<Expect>) {
    let mut objects = vec![];
    let mut expects = vec![];
    let mut with_secret = |name: &str, data: Value, reason: &'static str, message: &[&str]| {
        let secret_name = format!("{name}-credentials");
        objects.push(secret(&secret_name, data));
        let pc = config(
            sim,
            name,
            json!({"credentials": {"source": "Secret", "secretRef": {"name": secret_name}}}),
        );
        let answered: &[&str] = &["unauthorized: Authentication failed"];
        let vm_message = (reason == "Unauthorized").then_some(answered);
        config_and_user(
            &mut objects,
            &mut expects,
            name,
            pc,
            reason,
            message,
            vm_message,
            false,
        );
    };
    with_secret(
        "token-id-only",
        json!({"tokenId": "root@pam!sim"}),
        "InvalidCredentials",
        &[
            "must hold the keys tokenId and secret",
            "or username and password",
        ],
    );
    with_secret(
        "token-id-malformed",
        json!({"tokenId": "root", "secret": "pve-sim-secret"}),
        "InvalidCredentials",
        &["tokenId must look like USER@REALM!TOKENID"],
    );
    with_secret(
        "username-without-realm",
        json!({"username": "root", "password": "pw"}),
        "InvalidCredentials",
        &["username must look like USER@REALM"],
    );
    with_secret(
        "empty-secret",
        json!({}),
        "InvalidCredentials",
        &["must hold the keys tokenId and secret"],
    );
    with_secret(
        "secret-not-ascii",
        json!({"tokenId": "root@pam!sim", "secret": "sécret"}),
        "InvalidCredentials",
        &["printable ASCII only"],
    );
    with_secret(
        "wrong-token",
        json!({"tokenId": "root@pam!sim", "secret": "not-the-token"}),
        "Unauthorized",
        &["Proxmox refused the credentials"],
    );

    let no_secret = config(
        sim,
        "no-secret",
        json!({"credentials": {"source": "Secret", "secretRef": {"name": "no-such-secret"}}}),
    );
    let missing = ["the credentials Secret", "no-such-secret does not exist"];
    config_and_user(
        &mut objects,
        &mut expects,
        "no-secret",
        no_secret,
        "SecretNotFound",
        &missing,
        None,
        false,
    );
    let unusable = "the CA bundle (tls.caBundle or tls.caBundleSecretRef) cannot be used";
    let garbage = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n";
    let tls_rows: Vec<(&str, Value, &'static str, Vec<&str>)> = vec![
        (
            "ca-secret-missing",
            json!({"caBundleSecretRef": {"name": "no-such-ca"}}),
            "SecretNotFound",
            vec!["the CA bundle Secret", "no-such-ca does not exist"],
        ),
        (
            "ca-secret-without-key",
            json!({"caBundleSecretRef": {"name": "ca-other-key"}}),
            "TlsError",
            vec!["has no key ca.crt"],
        ),
        (
            "ca-secret-not-pem",
            json!({"caBundleSecretRef": {"name": "ca-garbage"}}),
            "TlsError",
            vec![unusable, "no PEM certificate"],
        ),
        (
            "ca-inline-garbage",
            json!({"caBundle": garbage}),
            "TlsError",
            vec![unusable, "invalid CA certificate"],
        ),
        (
            "fingerprint-other",
            json!({"fingerprint": FINGERPRINT}),
            "TlsError",
            vec!["fingerprint"],
        ),
    ];
    objects.push(secret(
        "ca-other-key",
        json!({"ca.pem": "-----BEGIN CERTIFICATE-----\n"}),
    ));
    objects.push(secret("ca-garbage", json!({"ca.crt": "hello"})));
    for (name, tls, reason, message) in tls_rows {
        // Without the pinned fingerprint: the CA bundle decides.
        let pc = config(sim, name, json!({"tls": tls}));
        config_and_user(
            &mut objects,
            &mut expects,
            name,
            pc,
            reason,
            &message,
            None,
            false,
        );
    }

    // Plain HTTP, allowed loudly: said on the config while it is set.
    let http = sim.handle.base_url().replacen("https://", "http://", 1);
    objects.push(config(
        sim,
        "plain-http-allowed",
        json!({"endpoint": http, "tls": {"insecureAllowPlainHTTP": true}}),
    ));
    expects.push(config_warns(
        "plain-http-allowed",
        "InsecureTransport",
        &[
            "the endpoint is http:// (tls.insecureAllowPlainHTTP)",
            "carries the API token or password unencrypted",
        ],
    ));
    let mut missing = vm_using("missing-config", "no-such-config");
    missing["metadata"]["name"] = json!("missing-config");
    objects.push(missing);
    expects.push(vm_says(
        "missing-config",
        "ProviderConfigNotFound",
        &["ProviderConfig \"no-such-config\" not found"],
    ));
    let vm_rows: Vec<(&str, Value, &'static str, Vec<&str>)> = vec![
        (
            "no-such-template",
            json!({"disks": null, "clone": {"templateName": "no-such-template"}}),
            "TemplateNotFound",
            vec!["the clone template does not exist"],
        ),
        (
            "no-such-password",
            json!({"cloudInit": {"user": "ubuntu", "passwordSecretRef": {"name": "no-such-password", "key": "pw"}}}),
            "SecretNotFound",
            vec!["no-such-password"],
        ),
        // Said by Proxmox; blamed on the config today (issue 9, item 1).
        (
            "no-such-node",
            json!({"node": "pve9"}),
            "ReconcileError",
            vec!["hostname lookup 'pve9' failed"],
        ),
    ];
    for (name, change, reason, message) in vm_rows {
        objects.push(vm_with(name, change));
        expects.push(vm_says(name, reason, &message));
    }
    // Another VM's disk is imported only as that VM could be cloned: by
    // default not at all (it is no template), under a clonePolicy when the
    // policy names it (`IMPORTED_BY_POLICY` becomes Ready), not when it
    // does not. The VMs are `import_sources`.
    objects.push(config(
        sim,
        "golden-only",
        json!({"clonePolicy": {"allowNonTemplates": {"tags": ["golden"]}}}),
    ));
    let refused_import = |vmid: u32| {
        vec![
            format!(
                "spec.forProvider.disks[0].importFrom \"local-lvm:vm-{vmid}-disk-0\" is a disk of VM {vmid}: VM {vmid} is not a template"
            ),
            "clonePolicy.allowNonTemplates".to_owned(),
            "nothing is imported until it is one".to_owned(),
        ]
    };
    for (name, config, vmid) in [
        (IMPORT_REFUSED[0], None, 778),
        (IMPORT_REFUSED[1], Some("golden-only"), 777),
        (IMPORTED_BY_POLICY, Some("golden-only"), 778),
    ] {
        let mut vm = vm_with(
            name,
            json!({"disks": [{"slot": "scsi0", "storage": "local-lvm", "importFrom": format!("local-lvm:vm-{vmid}-disk-0")}]}),
        );
        if let Some(config) = config {
            vm["spec"]["providerConfigRef"]["name"] = json!(config);
        }
        objects.push(vm);
        if name != IMPORTED_BY_POLICY {
            let message = refused_import(vmid);
            let message: Vec<&str> = message.iter().map(String::as_str).collect();
            expects.push(vm_says(name, "NotATemplate", &message));
        }
    }
    // What the node cannot run, refused before the VM exists (pve-sim's
    // nodes: 16 CPUs, 64 GiB, the bridge vmbr0).
    for (name, change, reason, message) in limit_rows() {
        objects.push(vm_with(name, change));
        expects.push(vm_says(name, reason, &message));
    }
    // Annotations that are ignored or clamped: a Warning, the VM converges.
    for (name, value, message) in [
        ("poll-banana", "banana", "\"banana\" is not a Go duration"),
        ("poll-zero", "0s", "\"0s\" is shorter than 5s: 5s is used"),
    ] {
        let mut vm = manifests::vm(name, manifests::imported(json!({})));
        vm["metadata"]["annotations"] = json!({"crossplane.io/poll-interval": value});
        objects.push(vm);
        expects.push(vm_warns(
            name,
            "InvalidAnnotation",
            &["crossplane.io/poll-interval", message],
        ));
    }
    // A connection Secret that exists and is not the resource's.
    objects.push(secret(
        "someones-secret",
        json!({"token": "not-for-the-provider"}),
    ));
    let mut foreign = vm_with("conn-foreign", json!({}));
    foreign["spec"]["writeConnectionSecretToRef"] = json!({"name": "someones-secret"});
    objects.push(foreign);
    expects.push(vm_says(
        "conn-foreign",
        "ConnectionSecretConflict",
        &[
            "the connection Secret someones-secret (writeConnectionSecretToRef) exists and was not made by this resource",
            "name a Secret that does not exist yet",
        ],
    ));
    (objects, expects)
}
