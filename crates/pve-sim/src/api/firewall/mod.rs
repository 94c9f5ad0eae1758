//! `/cluster/firewall`: the cluster-wide security groups and IP sets
//! (cluster.fw), with pve-firewall's checks, digests and rule positions.
//! Reading needs `Sys.Audit` on `/`, changing `Sys.Modify` on `/`.

pub mod check;
pub mod groups;
pub mod ipset;
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
    vec![
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
            &[groups::RULE_COMMON, groups::RULE_REQUIRED],
            sim_handler!(groups::create_rule),
        ),
        route(
            "DELETE",
            GROUP,
            &[groups::ONE],
            sim_handler!(groups::delete),
        ),
        route("GET", RULE, &[groups::RULE], sim_handler!(groups::rule)),
        route(
            "PUT",
            RULE,
            &[groups::RULE_COMMON, groups::RULE_CHANGE],
            sim_handler!(groups::update_rule),
        ),
        route(
            "DELETE",
            RULE,
            &[groups::RULE_DELETE],
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
    ]
}
