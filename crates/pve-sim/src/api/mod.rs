//! The endpoints the simulator serves: one route table, shared by the
//! request pipeline and the schema conformance test.

pub mod access;
pub mod acl;
pub mod backup;
pub mod cluster;
pub mod download;
pub mod firewall;
pub mod generic;
pub mod ha;
pub mod lxc;
pub mod mapping;
pub mod network;
pub mod nodes;
pub mod oci;
pub mod pools;
pub mod qemu;
pub mod resources;
pub mod restore;
pub mod sdn;
pub mod storage;
pub mod tasks;
pub mod upload;
pub mod url_metadata;
pub mod vzdump;

use crate::http::router::{Access, Route};
use crate::schema::qemu as qp;
use crate::sim_handler;
use qemu::{NODE_VMID, agent, clone, config, create, lifecycle, power, snapshot, status};

pub(crate) const fn route(
    method: &'static str,
    path: &'static str,
    params: &'static [&'static [crate::schema::Param]],
    handler: crate::http::router::Handler,
) -> Route {
    Route {
        method,
        path,
        params,
        access: Access::Authenticated,
        handler,
    }
}

/// The routes of PVE 9 (the schema tests' reference).
pub fn routes() -> Vec<Route> {
    routes_for(9)
}

/// The routes of a PVE major version.
pub fn routes_for(pve_version: u8) -> Vec<Route> {
    let mut routes = vec![
        route("GET", "/version", &[], sim_handler!(access::version)),
        Route {
            access: Access::World,
            ..route(
                "POST",
                "/access/ticket",
                &[access::TICKET],
                sim_handler!(access::ticket),
            )
        },
        route(
            "GET",
            "/cluster/nextid",
            &[cluster::NEXTID],
            sim_handler!(cluster::nextid),
        ),
        route(
            "GET",
            "/cluster/resources",
            &[resources::PARAMS],
            sim_handler!(resources::resources),
        ),
        route("GET", "/cluster/status", &[], sim_handler!(cluster::status)),
        route(
            "GET",
            "/cluster/options",
            &[],
            sim_handler!(cluster::options),
        ),
        route(
            "PUT",
            "/cluster/options",
            &[cluster::OPTIONS],
            sim_handler!(cluster::set_options),
        ),
        route("GET", "/access/acl", &[acl::READ], sim_handler!(acl::read)),
        route(
            "PUT",
            "/access/acl",
            &[acl::UPDATE],
            sim_handler!(acl::update),
        ),
        route("GET", "/pools", &[pools::INDEX], sim_handler!(pools::index)),
        route(
            "POST",
            "/pools",
            &[pools::CREATE],
            sim_handler!(pools::create),
        ),
        route(
            "PUT",
            "/pools",
            &[pools::UPDATE],
            sim_handler!(pools::update),
        ),
        route(
            "DELETE",
            "/pools",
            &[pools::DELETE],
            sim_handler!(pools::delete),
        ),
        route(
            "GET",
            "/pools/{poolid}",
            &[pools::ONE],
            sim_handler!(pools::get),
        ),
        route(
            "PUT",
            "/pools/{poolid}",
            &[pools::UPDATE],
            sim_handler!(pools::update),
        ),
        route(
            "DELETE",
            "/pools/{poolid}",
            &[pools::DELETE],
            sim_handler!(pools::delete),
        ),
        route("GET", "/nodes", &[], sim_handler!(nodes::list)),
        route(
            "GET",
            "/nodes/{node}/status",
            &[nodes::NODE_ONLY],
            sim_handler!(nodes::status),
        ),
        route(
            "GET",
            "/nodes/{node}/network",
            &[network::INDEX],
            sim_handler!(network::index),
        ),
        route(
            "GET",
            "/nodes/{node}/storage",
            &[storage::LIST],
            sim_handler!(storage::list),
        ),
        route(
            "GET",
            "/nodes/{node}/storage/{storage}/status",
            &[storage::ONE],
            sim_handler!(storage::status),
        ),
        route(
            "GET",
            "/nodes/{node}/storage/{storage}/content",
            &[storage::CONTENT],
            sim_handler!(storage::content),
        ),
        route(
            "GET",
            "/nodes/{node}/storage/{storage}/content/{volume}",
            &[storage::VOLUME],
            sim_handler!(storage::volume_info),
        ),
        route(
            "PUT",
            "/nodes/{node}/storage/{storage}/content/{volume}",
            &[storage::VOLUME_UPDATE],
            sim_handler!(storage::volume_update),
        ),
        route(
            "DELETE",
            "/nodes/{node}/storage/{storage}/content/{volume}",
            &[storage::VOLUME_DELETE],
            sim_handler!(storage::volume_delete),
        ),
        route(
            "POST",
            "/nodes/{node}/storage/{storage}/download-url",
            &[download::PARAMS],
            sim_handler!(download::download_url),
        ),
        route(
            "GET",
            "/nodes/{node}/query-url-metadata",
            &[url_metadata::PARAMS],
            sim_handler!(url_metadata::query),
        ),
        route(
            "POST",
            "/nodes/{node}/storage/{storage}/upload",
            &[upload::PARAMS],
            sim_handler!(upload::upload),
        ),
        route(
            "POST",
            "/nodes/{node}/vzdump",
            &[vzdump::PARAMS],
            sim_handler!(vzdump::vzdump),
        ),
        route(
            "GET",
            "/nodes/{node}/tasks",
            &[tasks::LIST],
            sim_handler!(tasks::list),
        ),
        route("GET", "/cluster/tasks", &[], sim_handler!(tasks::cluster)),
        route(
            "GET",
            "/nodes/{node}/tasks/{upid}",
            &[tasks::ONE],
            sim_handler!(tasks::index),
        ),
        route(
            "GET",
            "/nodes/{node}/tasks/{upid}/status",
            &[tasks::ONE],
            sim_handler!(tasks::status),
        ),
        route(
            "GET",
            "/nodes/{node}/tasks/{upid}/log",
            &[tasks::LOG],
            sim_handler!(tasks::log),
        ),
        route(
            "GET",
            "/nodes/{node}/qemu",
            &[status::LIST],
            sim_handler!(status::list),
        ),
        route(
            "POST",
            "/nodes/{node}/qemu",
            &[qp::CREATE, restore::QEMU, qp::CONFIG],
            sim_handler!(create::create),
        ),
        route(
            "GET",
            "/nodes/{node}/qemu/{vmid}",
            &[NODE_VMID],
            sim_handler!(status::vm_index),
        ),
        route(
            "DELETE",
            "/nodes/{node}/qemu/{vmid}",
            lifecycle::PARAMS_DESTROY,
            sim_handler!(lifecycle::destroy),
        ),
        route(
            "GET",
            "/nodes/{node}/qemu/{vmid}/config",
            &[config::GET],
            sim_handler!(config::get),
        ),
        route(
            "POST",
            "/nodes/{node}/qemu/{vmid}/config",
            &[qp::UPDATE, qp::UPDATE_ASYNC, qp::CONFIG],
            sim_handler!(config::post),
        ),
        route(
            "PUT",
            "/nodes/{node}/qemu/{vmid}/config",
            &[qp::UPDATE, qp::CONFIG],
            sim_handler!(config::put),
        ),
        route(
            "GET",
            "/nodes/{node}/qemu/{vmid}/pending",
            &[NODE_VMID],
            sim_handler!(config::pending),
        ),
        route(
            "PUT",
            "/nodes/{node}/qemu/{vmid}/resize",
            lifecycle::PARAMS_RESIZE,
            sim_handler!(lifecycle::resize),
        ),
        route(
            "POST",
            "/nodes/{node}/qemu/{vmid}/template",
            lifecycle::PARAMS_TEMPLATE,
            sim_handler!(lifecycle::template),
        ),
        route(
            "POST",
            "/nodes/{node}/qemu/{vmid}/clone",
            clone::PARAMS,
            sim_handler!(clone::clone),
        ),
        route(
            "GET",
            "/nodes/{node}/qemu/{vmid}/status",
            &[NODE_VMID],
            sim_handler!(status::status_index),
        ),
        route(
            "GET",
            "/nodes/{node}/qemu/{vmid}/status/current",
            &[NODE_VMID],
            sim_handler!(status::current),
        ),
        route(
            "POST",
            "/nodes/{node}/qemu/{vmid}/status/start",
            power::PARAMS_START,
            sim_handler!(power::start_handler),
        ),
        route(
            "POST",
            "/nodes/{node}/qemu/{vmid}/status/stop",
            power::PARAMS_STOP,
            sim_handler!(power::stop_handler),
        ),
        route(
            "POST",
            "/nodes/{node}/qemu/{vmid}/status/shutdown",
            power::PARAMS_SHUTDOWN,
            sim_handler!(power::shutdown_handler),
        ),
        route(
            "POST",
            "/nodes/{node}/qemu/{vmid}/status/reboot",
            power::PARAMS_REBOOT,
            sim_handler!(power::reboot_handler),
        ),
    ];
    routes.extend(agent::routes());
    routes.extend(lxc::routes());
    routes.extend(ha::routes(pve_version));
    // OCI images came with PVE 9.1 (the 9.x the sim reports).
    if pve_version >= 9 {
        routes.push(route(
            "POST",
            "/nodes/{node}/storage/{storage}/oci-registry-pull",
            &[oci::PARAMS],
            sim_handler!(oci::pull),
        ));
    }
    routes.extend(mapping::routes());
    routes.extend(firewall::routes());
    routes.extend(backup::routes());
    routes.extend(sdn::routes());
    routes.extend(migrate_routes());
    routes.extend(snapshot_routes());
    routes
}

/// The snapshot endpoints of VMs and containers (one module serves both,
/// as pve-guest-common's `AbstractConfig` does in PVE).
fn snapshot_routes() -> Vec<Route> {
    use snapshot::{lxc as ct, qemu as vm};
    vec![
        route(
            "GET",
            "/nodes/{node}/qemu/{vmid}/snapshot",
            &[NODE_VMID],
            sim_handler!(vm::list),
        ),
        route(
            "POST",
            "/nodes/{node}/qemu/{vmid}/snapshot",
            snapshot::CREATE,
            sim_handler!(vm::create),
        ),
        route(
            "GET",
            "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}",
            snapshot::ONE,
            sim_handler!(vm::index),
        ),
        route(
            "DELETE",
            "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}",
            snapshot::DELETE,
            sim_handler!(vm::delete),
        ),
        route(
            "POST",
            "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback",
            snapshot::ROLLBACK,
            sim_handler!(vm::rollback),
        ),
        route(
            "GET",
            "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config",
            snapshot::ONE,
            sim_handler!(vm::config_get),
        ),
        route(
            "PUT",
            "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config",
            snapshot::UPDATE,
            sim_handler!(vm::config_put),
        ),
        route(
            "GET",
            "/nodes/{node}/lxc/{vmid}/snapshot",
            &[NODE_VMID],
            sim_handler!(ct::list),
        ),
        route(
            "POST",
            "/nodes/{node}/lxc/{vmid}/snapshot",
            snapshot::CREATE_CT,
            sim_handler!(ct::create),
        ),
        route(
            "GET",
            "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}",
            snapshot::ONE,
            sim_handler!(ct::index),
        ),
        route(
            "DELETE",
            "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}",
            snapshot::DELETE,
            sim_handler!(ct::delete),
        ),
        route(
            "POST",
            "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/rollback",
            snapshot::ROLLBACK,
            sim_handler!(ct::rollback),
        ),
        route(
            "GET",
            "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/config",
            snapshot::ONE,
            sim_handler!(ct::config_get),
        ),
        route(
            "PUT",
            "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/config",
            snapshot::UPDATE,
            sim_handler!(ct::config_put),
        ),
    ]
}

fn migrate_routes() -> Vec<Route> {
    use qemu::migrate;
    vec![
        route(
            "GET",
            "/nodes/{node}/qemu/{vmid}/migrate",
            migrate::PRECONDITION,
            sim_handler!(migrate::precondition),
        ),
        route(
            "POST",
            "/nodes/{node}/qemu/{vmid}/migrate",
            migrate::MIGRATE,
            sim_handler!(migrate::migrate),
        ),
        route(
            "POST",
            "/nodes/{node}/qemu/{vmid}/move_disk",
            migrate::MOVE_DISK,
            sim_handler!(migrate::move_disk),
        ),
    ]
}
