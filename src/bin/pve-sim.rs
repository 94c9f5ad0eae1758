//! `pve-sim`: the Proxmox VE API simulator binary.

fn main() {
    provider_proxmox::install_crypto_provider();
}
