//! Who may configure pass-through devices (qemu-server's
//! `check_hostpci_perm`, `check_usb_perm`, `check_rng_perm`): root may set
//! anything; others need a cluster mapping and `Mapping.Use` on it. Serial
//! ports likewise: a socket needs `VM.Config.HWType`, a host device root.

use crate::auth::Identity;
use crate::http::ApiError;
use crate::instance::Instance;
use crate::schema::propstr;

/// Checks a `hostpciN`, `usbN` or `rng0` value; `Ok(false)` for other keys.
pub fn check(
    inst: &Instance,
    id: &Identity,
    vm_path: &str,
    key: &str,
    value: &str,
) -> Result<bool, ApiError> {
    let bus = key.trim_end_matches(|c: char| c.is_ascii_digit());
    if !["hostpci", "usb", "rng"].contains(&bus) {
        return Ok(false);
    }
    if id.is_root() {
        return Ok(true);
    }
    let parsed = |f: &propstr::PropFormat| {
        f.parse(key, value)
            .map_err(|e| ApiError::param(key, format!("invalid format - {e}")))
    };
    let hwtype = || inst.auth.check(id, vm_path, &["VM.Config.HWType"]);
    match bus {
        "hostpci" => {
            let dev = parsed(&propstr::HOSTPCI)?;
            if dev.contains_key("host") {
                return Err(ApiError::internal(format!(
                    "only root can set '{key}' config for non-mapped devices"
                )));
            }
            let Some(mapping) = dev.get("mapping") else {
                return Err(ApiError::internal(
                    "either 'host' or 'mapping' must be set.",
                ));
            };
            inst.auth
                .check(id, &format!("/mapping/pci/{mapping}"), &["Mapping.Use"])?;
            hwtype()?;
            if dev.contains_key("romfile") {
                return Err(ApiError::param(
                    key,
                    "only root@pam can set 'romfile' option",
                ));
            }
        }
        "usb" => {
            hwtype()?;
            let dev = parsed(&propstr::USB)?;
            match (dev.get("host"), dev.get("mapping")) {
                (Some(host), _) if host.eq_ignore_ascii_case("spice") => {}
                (Some(_), _) => {
                    return Err(ApiError::internal(format!(
                        "only root can set '{key}' config for real devices"
                    )));
                }
                (None, Some(mapping)) => {
                    inst.auth
                        .check(id, &format!("/mapping/usb/{mapping}"), &["Mapping.Use"])?;
                }
                (None, None) => {
                    return Err(ApiError::internal(
                        "either 'host' or 'mapping' must be set.",
                    ));
                }
            }
        }
        _ => {
            hwtype()?;
            let dev = parsed(&propstr::RNG)?;
            if dev.get("source").is_some_and(|s| s == "/dev/hwrng") {
                inst.auth.check(id, "/mapping/hwrng", &["Mapping.Use"])?;
            }
        }
    }
    Ok(true)
}

/// Checks a `serialN` value (`$check_vm_create_serial_perm` and its update
/// counterpart); `Ok(false)` for other keys.
pub fn check_serial(
    inst: &Instance,
    id: &Identity,
    vm_path: &str,
    key: &str,
    value: &str,
    creating: bool,
) -> Result<bool, ApiError> {
    let is_serial = key
        .strip_prefix("serial")
        .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()));
    if !is_serial || id.is_root() {
        return Ok(is_serial);
    }
    if value == "socket" || value.is_empty() {
        inst.auth.check(id, vm_path, &["VM.Config.HWType"])?;
        return Ok(true);
    }
    let verb = if creating { "set" } else { "modify" };
    Err(ApiError::internal(format!(
        "only root can {verb} '{key}' config for real devices"
    )))
}
