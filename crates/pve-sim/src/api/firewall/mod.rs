//! `/cluster/firewall`: the cluster-wide security groups and IP sets
//! (cluster.fw), with pve-firewall's checks, digests and rule positions;
//! reading needs `Sys.Audit` on `/`, changing `Sys.Modify` on `/`. And
//! each guest's own firewall ([`guest`]).

pub mod check;
pub mod groups;
pub mod guest;
pub mod guest_alias;
pub mod ipset;
pub mod list;
pub mod rule;

use super::route;
use crate::http::router::Route;
use crate::sim_handler;

/// The firewall's routes.
pub fn routes() -> Vec<Route> {
    const GROUPS: &str = "/cluster/firewall/groups";
    const GROUP: &str = "/cluster/firewall/groups/{group}";
    const RULE: &str = "/cluster/firewall/groups/{group}/{pos}";
    const SETS: &str = "/cluster/firewall/ipset";
    const SET: &str = "/cluster/firewall/ipset/{name}";
    const ENTRY: &str = "/cluster/firewall/ipset/{name}/{cidr}";
    let mut routes = guest::routes();
    routes.extend([
        route("GET", GROUPS, &[], sim_handler!(groups::index)),
        route(
            "POST",
            GROUPS,
            &[groups::CREATE],
            sim_handler!(groups::create),
        ),
        route("GET", GROUP, &[groups::ONE], sim_handler!(groups::rules)),
        route(
            "POST",
            GROUP,
            &[groups::ONE, list::PROPS, list::REQUIRED],
            sim_handler!(groups::create_rule),
        ),
        route(
            "DELETE",
            GROUP,
            &[groups::ONE],
            sim_handler!(groups::delete),
        ),
        route(
            "GET",
            RULE,
            &[groups::ONE, list::ONE],
            sim_handler!(groups::rule),
        ),
        route(
            "PUT",
            RULE,
            &[groups::ONE, list::PROPS, list::CHANGE],
            sim_handler!(groups::update_rule),
        ),
        route(
            "DELETE",
            RULE,
            &[groups::ONE, list::DELETE],
            sim_handler!(groups::delete_rule),
        ),
        route("GET", SETS, &[], sim_handler!(ipset::index)),
        route("POST", SETS, &[ipset::CREATE], sim_handler!(ipset::create)),
        route("GET", SET, &[ipset::ONE], sim_handler!(ipset::entries)),
        route("POST", SET, &[ipset::ADD], sim_handler!(ipset::add)),
        route("DELETE", SET, &[ipset::DELETE], sim_handler!(ipset::delete)),
        route("PUT", ENTRY, &[ipset::UPDATE], sim_handler!(ipset::update)),
        route(
            "DELETE",
            ENTRY,
            &[ipset::REMOVE],
            sim_handler!(ipset::remove),
        ),
    ]);
    routes
}
