//! Linters and consistency checks for what cannot run here (no Docker
//! engine, no kind, no Crossplane CLI): the Dockerfile with BuildKit's own
//! checks, the scripts with shellcheck, the GitHub workflow, the Helm
//! chart's copy of the CRDs, the assembled Crossplane package root, and the
//! simulator's TLS certificate from `scripts/pve-sim-tls.sh`.

use std::process::Command;

use serde_json::Value;

use crate::tools::{self, read, repo, run, run_ok, temp_file, tool, yaml_docs};

/// BuildKit's Dockerfile checks (what `docker build --check` runs) plus
/// "every COPY source exists and .dockerignore lets it in", as JSON.
fn dockerfile_lint(dockerfile: &std::path::Path, context: &std::path::Path) -> (bool, Value) {
    let out = run(Command::new(tool("dockerfile-lint"))
        .arg("-json")
        .arg("-context")
        .arg(context)
        .arg(dockerfile));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "dockerfile-lint printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.success(), report)
}

#[test]
fn dockerfile_passes_buildkit_checks_and_builds_a_non_root_image() {
    let (clean, report) = dockerfile_lint(&repo().join("Dockerfile"), repo());
    assert!(clean, "Dockerfile findings: {:#}", report["findings"]);
    assert_eq!(report["findings"], serde_json::json!([]));

    let stages = report["stages"].as_array().unwrap();
    assert!(stages.len() >= 2, "multi-stage: {stages:#?}");
    let last = stages.last().unwrap();
    assert_eq!(
        last["base"].as_str().unwrap(),
        "scratch",
        "the final image holds the static binaries and nothing else: {last}"
    );
    assert_non_root(last);
    assert_eq!(
        last["name"], "runtime",
        "the provider is the default target"
    );
    assert_eq!(last["expose"], serde_json::json!(["8080"]));
    assert_eq!(
        last["entrypoint"],
        serde_json::json!(["/usr/local/bin/proxmox-provider"])
    );
    assert_eq!(last["cmd"], serde_json::json!(["run"]));

    let text = read("Dockerfile");
    assert!(
        text.contains(
            "cargo build --profile \"$CARGO_PROFILE\" --locked --target \"$target\" --workspace --bin proxmox-provider --bin pve-sim"
        ) && text.contains("\nARG CARGO_PROFILE=release\n"),
        "a static release build of both binaries"
    );
    assert!(
        text.contains("COPY --from=build /out/proxmox-provider /out/pve-sim /usr/local/bin/"),
        "both binaries in the final image"
    );
}

/// A stage's USER is numeric and not root, so `runAsNonRoot` can verify it.
fn assert_non_root(stage: &Value) {
    let user = stage["user"].as_str().expect("the stage sets USER");
    let (uid, gid) = user.split_once(':').unwrap_or((user, user));
    let uid: u32 = uid
        .parse()
        .expect("USER is numeric, so runAsNonRoot can verify it");
    let gid: u32 = gid.parse().expect("group is numeric");
    assert!(uid != 0 && gid != 0, "USER {user} is not root");
}

/// `docker build --target pve-sim`: the simulator alone, static, on scratch,
/// non-root, serving 8006 on all addresses of the container by default,
/// built without compiling the provider.
#[test]
fn dockerfile_has_a_pve_sim_target() {
    let (clean, report) = dockerfile_lint(&repo().join("Dockerfile"), repo());
    assert!(clean, "Dockerfile findings: {:#}", report["findings"]);
    let stages = report["stages"].as_array().unwrap();
    let sim = stages
        .iter()
        .find(|s| s["name"] == "pve-sim")
        .unwrap_or_else(|| panic!("no stage named pve-sim: {stages:#?}"));
    assert_eq!(sim["base"], "scratch", "{sim}");
    assert_non_root(sim);
    assert_eq!(sim["expose"], serde_json::json!(["8006"]));
    assert_eq!(
        sim["entrypoint"],
        serde_json::json!(["/usr/local/bin/pve-sim"])
    );
    assert_eq!(sim["cmd"], serde_json::json!(["--listen=0.0.0.0:8006"]));

    let text = read("Dockerfile");
    let section = text
        .split("\nFROM ")
        .find(|s| s.starts_with("scratch AS pve-sim"))
        .unwrap();
    let copies: Vec<&str> = section.lines().filter(|l| l.starts_with("COPY")).collect();
    assert_eq!(
        copies,
        ["COPY --from=sim-build /out/pve-sim /usr/local/bin/pve-sim"],
        "the binary and nothing else"
    );
    assert!(
        text.contains(
            "cargo build --profile \"$CARGO_PROFILE\" --locked --target \"$target\" --package pve-sim --bin pve-sim"
        ),
        "a static release build of the simulator alone"
    );
}

#[test]
fn dockerfile_linter_reports_what_it_should() {
    // The linter is only worth trusting if it fails on a bad Dockerfile.
    let dir = temp_file(".dir", "").with_extension("ctx");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(".dockerignore"), "*\n!kept\n").unwrap();
    std::fs::write(dir.join("kept"), "").unwrap();
    std::fs::write(dir.join("ignored"), "").unwrap();
    std::fs::write(
        dir.join("Dockerfile"),
        "FROM alpine as Build\nCOPY ignored missing /x/\nCOPY kept /kept\nCMD echo hi\n",
    )
    .unwrap();
    let (clean, report) = dockerfile_lint(&dir.join("Dockerfile"), &dir);
    assert!(!clean);
    let rules: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    for rule in [
        "StageNameCasing",
        "FromAsCasing",
        "JSONArgsRecommended",
        "ContextSourceIgnored",
        "ContextSourceMissing",
    ] {
        assert!(rules.contains(&rule), "{rule} not reported: {rules:?}");
    }
    assert_eq!(
        rules.iter().filter(|r| r.starts_with("Context")).count(),
        2,
        "`kept` is allowed back in by !kept: {report:#}"
    );
}

#[test]
fn dockerignore_is_an_allow_list() {
    let text = read(".dockerignore");
    let patterns: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(
        patterns.first(),
        Some(&"*"),
        "exclude everything first, so target/, .git and .work/ never reach the builder"
    );
    // After `*`, allows (`!dir/`), each narrowed only inside a directory
    // allowed before it (`dir/*`): nothing outside an allowed directory is
    // ever let in.
    let mut allowed: Vec<&str> = vec![];
    for pattern in &patterns[1..] {
        match pattern.strip_prefix('!') {
            Some(allow) => allowed.push(allow),
            None => assert!(
                allowed
                    .iter()
                    .any(|dir| dir.ends_with('/') && pattern.starts_with(dir)),
                "{pattern} narrows no directory allowed before it: {patterns:?}"
            ),
        }
    }
    for never in ["target", ".git", ".work"] {
        assert!(
            !allowed.iter().any(|a| a.trim_end_matches('/') == never),
            "{never} is allowed: {patterns:?}"
        );
    }
}

/// Every shell script of the repository's packaging, and `make demo`'s.
fn scripts() -> Vec<std::path::PathBuf> {
    let mut files = vec![];
    for dir in ["scripts", "hack/tools", "hack/node", "hack/crossplane"] {
        for entry in std::fs::read_dir(repo().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "sh") {
                files.push(path);
            }
        }
    }
    files.push(repo().join("hack/demo.sh"));
    files.sort();
    files
}

#[test]
fn scripts_pass_shellcheck_and_are_executable() {
    let files = scripts();
    for expected in [
        "scripts/kind-e2e.sh",
        "scripts/pve-sim-tls.sh",
        "scripts/build-xpkg.sh",
        "hack/demo.sh",
        "hack/crossplane/run.sh",
        "hack/crossplane/build.sh",
    ] {
        assert!(files.contains(&repo().join(expected)), "{expected} missing");
    }
    let out = run(Command::new(tool("shellcheck"))
        .args(["--external-sources", "--severity=style", "--format=gcc"])
        .args(&files)
        .current_dir(repo()));
    assert!(
        out.status.success(),
        "shellcheck findings:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for file in &files {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(file).unwrap().permissions().mode();
        assert!(mode & 0o111 != 0, "{} is not executable", file.display());
        let text = std::fs::read_to_string(file).unwrap();
        assert!(
            text.starts_with("#!/usr/bin/env bash\n") && text.contains("set -euo pipefail"),
            "{}: bash with strict mode",
            file.display()
        );
    }
}

#[test]
fn shellcheck_reports_what_it_should() {
    let bad = temp_file(".sh", "#!/usr/bin/env bash\nrm -rf $1/*\n");
    let out = run(Command::new(tool("shellcheck")).arg(&bad));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("SC2086"));
}

#[test]
fn kind_workflow_runs_the_script_and_pins_its_actions() {
    let text = read(".github/workflows/e2e-kind.yaml");
    let docs = yaml_docs(&text, "e2e-kind.yaml");
    assert_eq!(docs.len(), 1);
    let workflow = &docs[0];
    // YAML 1.2 (as GitHub reads it): `on` is a string key, not `true`.
    let on = &workflow["on"];
    for trigger in ["push", "pull_request", "workflow_dispatch"] {
        assert!(on.get(trigger).is_some(), "trigger {trigger}: {on}");
    }
    assert_eq!(workflow["permissions"]["contents"], "read");
    let steps = workflow["jobs"]["e2e"]["steps"].as_array().unwrap();
    let mut scripts = vec![];
    for step in steps {
        if let Some(uses) = step["uses"].as_str() {
            let (_, version) = uses.split_once('@').expect("actions are pinned");
            assert!(version.starts_with('v'), "{uses}: pinned to a release");
        }
        if let Some(run) = step["run"].as_str() {
            scripts.push(run.to_owned());
        }
    }
    assert!(
        scripts.iter().any(|s| s.trim() == "scripts/kind-e2e.sh"),
        "the workflow runs scripts/kind-e2e.sh: {scripts:?}"
    );
    let upload = steps
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/upload-artifact@"))
        })
        .expect("diagnostics are uploaded");
    assert_eq!(upload["if"], "failure()");

    // The `run:` blocks are bash: shellcheck them as such (as actionlint
    // does), with GitHub expressions replaced by a plain word.
    let expr = regex::Regex::new(r"\$\{\{[^}]*\}\}").unwrap();
    for script in scripts {
        let file = temp_file(
            ".sh",
            &format!(
                "#!/usr/bin/env bash\nset -euo pipefail\n{}",
                expr.replace_all(&script, "EXPR")
            ),
        );
        run_ok(Command::new(tool("shellcheck")).arg(&file));
    }
}

#[test]
fn helm_chart_crds_are_the_generated_ones() {
    let chart_crds = repo().join("deploy/helm/crossplane-provider-proxmox/crds");
    let mut names: Vec<String> = std::fs::read_dir(&chart_crds)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut generated: Vec<String> = std::fs::read_dir(repo().join("crds"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    generated.sort();
    assert_eq!(names, generated, "the chart has one copy of each CRD");
    for name in names {
        assert!(
            read(&format!("crds/{name}"))
                == read(&format!(
                    "deploy/helm/crossplane-provider-proxmox/crds/{name}"
                )),
            "deploy/helm/crossplane-provider-proxmox/crds/{name} differs from crds/{name}; \
             copy it: cp crds/*.yaml deploy/helm/crossplane-provider-proxmox/crds/"
        );
    }
}

#[test]
fn crossplane_package_root_holds_the_provider_meta_and_the_crds() {
    let dir = temp_file(".pkg", "").with_extension("root");
    let printed = run_ok(
        Command::new(repo().join("scripts/build-xpkg.sh"))
            .arg("--assemble-only")
            .arg(&dir),
    );
    assert_eq!(printed.trim(), dir.display().to_string());

    let meta = yaml_docs(
        &std::fs::read_to_string(dir.join("crossplane.yaml")).unwrap(),
        "meta",
    );
    assert_eq!(meta.len(), 1);
    assert_eq!(meta[0]["apiVersion"], "meta.pkg.crossplane.io/v1");
    assert_eq!(meta[0]["kind"], "Provider");
    // v2 and its pre-release builds (`v2.4.0-rc.1`, development builds):
    // without `-0`, Masterminds semver refuses every pre-release.
    assert_eq!(meta[0]["spec"]["crossplane"]["version"], ">=v2.0.0-0");
    // Every kind's controller starts when its CRD comes (Crossplane then
    // installs only the activated kinds' CRDs).
    assert_eq!(
        meta[0]["spec"]["capabilities"],
        serde_json::json!(["SafeStart"])
    );
    let readme = meta[0]["metadata"]["annotations"]["meta.crossplane.io/readme"]
        .as_str()
        .unwrap();
    for kind in provider_proxmox::api::kinds::managed() {
        assert!(
            readme.contains(&kind.kind),
            "the package readme names {}",
            kind.kind
        );
    }
    // Crossplane v2 takes the runtime image from the package itself.
    assert!(meta[0]["spec"].get("controller").is_none());

    let mut crds = vec![];
    for entry in std::fs::read_dir(dir.join("crds")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        assert_eq!(text, read(&format!("crds/{name}")), "{name}");
        let docs = yaml_docs(&text, &name);
        assert!(docs.iter().all(|d| d["kind"] == "CustomResourceDefinition"));
        crds.push(name);
    }
    crds.sort();
    let mut kinds: Vec<String> = provider_proxmox::api::kinds::all()
        .iter()
        .map(|k| k.file())
        .collect();
    kinds.sort();
    assert_eq!(crds, kinds);
    let top: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(
        top.len(),
        2,
        "only crossplane.yaml and crds/ in the package root"
    );
}

/// package/runtime-config.yaml: the DeploymentRuntimeConfig serves the
/// metrics where Crossplane's Deployment of the provider declares them
/// (container `package-runtime`, port 8080), and its NetworkPolicy selects
/// the Pods Crossplane labels with the package's name.
#[test]
fn crossplane_runtime_config_serves_metrics_on_crossplanes_port_to_monitoring_only() {
    let docs = yaml_docs(&read("package/runtime-config.yaml"), "runtime-config.yaml");
    let meta = yaml_docs(&read("package/crossplane.yaml"), "crossplane.yaml");
    let config = tools::find(&docs, "DeploymentRuntimeConfig", "provider-proxmox");
    assert_eq!(config["apiVersion"], "pkg.crossplane.io/v1beta1");
    let containers =
        &config["spec"]["deploymentTemplate"]["spec"]["template"]["spec"]["containers"];
    assert_eq!(
        containers[0]["name"], "package-runtime",
        "Crossplane's container name"
    );
    let env = containers[0]["env"].as_array().unwrap();
    let addr = env.iter().find(|e| e["name"] == "METRICS_ADDR").unwrap();
    assert_eq!(addr["value"], "0.0.0.0:8080");
    assert!(
        read("src/main.rs").contains(r#"env = "METRICS_ADDR""#),
        "the provider reads METRICS_ADDR"
    );
    let policy = tools::find(&docs, "NetworkPolicy", "provider-proxmox-metrics");
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"]["pkg.crossplane.io/provider"],
        meta[0]["metadata"]["name"],
        "Crossplane labels the Pods with the package's name"
    );
    assert_eq!(
        policy["spec"]["policyTypes"],
        serde_json::json!(["Ingress"])
    );
    let ingress = policy["spec"]["ingress"].as_array().unwrap();
    assert_eq!(ingress.len(), 1, "only the monitoring namespace gets in");
    assert_eq!(
        ingress[0]["ports"],
        serde_json::json!([{"port": 8080, "protocol": "TCP"}])
    );
}

#[test]
fn every_deploy_manifest_is_in_a_tested_place() {
    // Kustomizations must list every manifest next to them (as a resource
    // or a patch): a file left out would be neither installed nor tested.
    // Each directory, with the kustomizations that may list its files and
    // the path they list them under.
    let dirs: [(&str, &[(&str, &str)]); 4] = [
        (
            "deploy/provider",
            &[
                ("deploy/kustomization.yaml", "provider/"),
                ("deploy/provider/kustomization.yaml", ""),
            ],
        ),
        (
            "deploy/pve-sim",
            &[("deploy/pve-sim/kustomization.yaml", "")],
        ),
        (
            "deploy/namespaced",
            &[("deploy/namespaced/kustomization.yaml", "")],
        ),
        (
            "deploy/crossplane",
            &[("deploy/crossplane/kustomization.yaml", "")],
        ),
    ];
    for (dir, kustomizations) in dirs {
        let mut listed: Vec<String> = vec![];
        for (kustomization, prefix) in kustomizations {
            let doc = &yaml_docs(&read(kustomization), kustomization)[0];
            let resources = doc["resources"].as_array().into_iter().flatten();
            let patches = doc["patches"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| &p["path"]);
            for path in resources.chain(patches).filter_map(|p| p.as_str()) {
                if let Some(name) = path.strip_prefix(prefix) {
                    listed.push(name.to_owned());
                }
            }
        }
        for entry in std::fs::read_dir(repo().join(dir)).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if name == "kustomization.yaml" {
                continue;
            }
            assert!(
                listed.contains(&name),
                "{dir}/{name} is in none of {kustomizations:?}"
            );
        }
    }
    // Everything else under deploy/ belongs to a part with its own tests.
    let tested = [
        "kustomization.yaml",
        "provider",
        "namespaced",
        "pve-sim",
        "helm",
        "argocd",
        "flux",
        // manifests::helm_chart_with_other_values_is_accepted
        "crossplane",
    ];
    for entry in std::fs::read_dir(repo().join("deploy")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            tested.contains(&name.as_str()),
            "deploy/{name}: which test covers it?"
        );
    }
}

mod pve_sim_tls {
    //! The certificate `scripts/pve-sim-tls.sh` makes must satisfy rustls
    //! (which the provider uses) for the Service's name, and only for it.

    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Secret;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    fn secret_data(yaml: &str, key: &str) -> Vec<u8> {
        let docs = yaml_docs(yaml, "pve-sim-tls.sh output");
        assert_eq!(docs.len(), 1);
        let secret: Secret = serde_json::from_value(docs[0].clone()).unwrap();
        assert_eq!(secret.metadata.name.as_deref(), Some("pve-sim-tls"));
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
        secret.data.unwrap()[key].0.clone()
    }

    /// Serves TLS with `chain`/`key` on loopback once; returns whether a
    /// client trusting only `ca` completes a handshake for `name`.
    async fn handshake(chain: &[u8], key: &[u8], ca: &[u8], name: &str) -> Result<(), String> {
        let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut &chain[..])
            .collect::<Result<_, _>>()
            .unwrap();
        let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut &key[..])
            .unwrap()
            .expect("a private key");
        let server = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| format!("server config: {e}"))?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pemfile::certs(&mut &ca[..]) {
            roots.add(cert.unwrap()).unwrap();
        }
        let client = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();

        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
        let served = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            if let Ok(mut tls) = acceptor.accept(tcp).await {
                let mut byte = [0u8; 1];
                if tls.read_exact(&mut byte).await.is_ok() {
                    let _ = tls.write_all(&byte).await;
                    let _ = tls.shutdown().await;
                }
            }
        });
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
        let tcp = TcpStream::connect(addr).await.unwrap();
        let result = async {
            let name = ServerName::try_from(name.to_owned()).map_err(|e| e.to_string())?;
            let mut tls = connector
                .connect(name, tcp)
                .await
                .map_err(|e| e.to_string())?;
            tls.write_all(b"x").await.map_err(|e| e.to_string())?;
            let mut echo = [0u8; 1];
            tls.read_exact(&mut echo).await.map_err(|e| e.to_string())?;
            Ok(())
        }
        .await;
        served.abort();
        result
    }

    #[tokio::test]
    async fn certificate_verifies_for_the_service_name_only() {
        provider_proxmox::install_crypto_provider();
        let yaml = tools::pve_sim_tls(&["--namespace", "crossplane-system"]);
        let chain = secret_data(&yaml, "tls.crt");
        let key = secret_data(&yaml, "tls.key");
        let ca = secret_data(&yaml, "ca.crt");
        for name in [
            "pve-sim.crossplane-system.svc",
            "pve-sim.crossplane-system.svc.cluster.local",
            "pve-sim",
        ] {
            handshake(&chain, &key, &ca, name)
                .await
                .unwrap_or_else(|e| panic!("handshake as {name}: {e}"));
        }
        let wrong = handshake(&chain, &key, &ca, "pve.example.com").await;
        assert!(
            wrong
                .as_ref()
                .is_err_and(|e| e.contains("not valid for name")),
            "a certificate for another host name must be refused: {wrong:?}"
        );
        // A fresh run is a fresh CA: the old CA does not trust the new certificate.
        let again = tools::pve_sim_tls(&[]);
        let other_ca = secret_data(&again, "ca.crt");
        let refused = handshake(&chain, &key, &other_ca, "pve-sim.crossplane-system.svc").await;
        assert!(refused.is_err(), "{refused:?}");
    }
}
