//! `proxmox-provider`: the controller binary.

fn main() {
    provider_proxmox::install_crypto_provider();
}
