//! `proxmox-provider`: the controller binary.
//!
//! Subcommands:
//! * `crds`: print every CustomResourceDefinition as multi-document YAML, or
//!   write one file per CRD into a directory (how `crds/` is regenerated).
//!
//! The controller itself (`run`) joins [`Command`] as another variant.

use std::{
    io::Write,
    path::{Path, PathBuf},
};

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

/// Crossplane-style Kubernetes provider for Proxmox VE virtual machines.
#[derive(Parser, Debug)]
#[command(name = "proxmox-provider", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the CustomResourceDefinitions as multi-document YAML
    /// (`proxmox-provider crds | kubectl apply -f -` installs them).
    Crds(CrdsArgs),
}

#[derive(Args, Debug)]
struct CrdsArgs {
    /// Write one file per CRD into this directory instead of printing them
    /// (`proxmox-provider crds --output-dir crds` regenerates `crds/`).
    #[arg(long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    provider_proxmox::install_crypto_provider();
    match Cli::parse().command {
        Command::Crds(args) => match args.output_dir {
            Some(dir) => write_crds(&dir),
            None => print_crds(),
        },
    }
}

fn print_crds() -> anyhow::Result<()> {
    let yaml = provider_proxmox::api::crd::all_yaml().context("rendering the CRDs as YAML")?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(yaml.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing the CRDs to stdout")
}

fn write_crds(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (file, crd) in provider_proxmox::api::crd::all() {
        let yaml = provider_proxmox::api::crd::to_yaml(&crd)
            .with_context(|| format!("rendering {file} as YAML"))?;
        let path = dir.join(file);
        std::fs::write(&path, yaml).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
