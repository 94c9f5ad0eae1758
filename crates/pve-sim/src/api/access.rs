//! `GET /version` and `POST /access/ticket`.

use std::sync::Arc;

use serde_json::json;

use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::{Named, Param};

pub const TICKET: &[Param] = &[
    Param::string("username"),
    Param::string("password"),
    Param::string("realm").format(Named::PveRealm).opt(),
    Param::string("otp").opt(),
    Param::string("tfa-challenge").opt(),
    Param::boolean("new-format").opt(),
];

pub async fn version(inst: Arc<Instance>, _call: Call) -> Result<Reply, ApiError> {
    let (version, release, repoid) = inst.version();
    Ok(Reply::data(
        json!({"version": version, "release": release, "repoid": repoid}),
    ))
}

pub async fn ticket(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let p = &call.params;
    let login = inst.auth.login(
        p.get("username").unwrap_or_default(),
        p.get("realm"),
        p.get("password").unwrap_or_default(),
    );
    let Some(login) = login else {
        return Err(ApiError::LoginFailed);
    };
    let mut data = json!({
        "username": login.user,
        "ticket": login.ticket,
        "CSRFPreventionToken": login.csrf,
        "cap": inst.auth.capabilities(&login.user),
    });
    if inst.cluster().nodes.len() > 1 {
        data["clustername"] = json!("pve-sim");
    }
    Ok(Reply::data(data))
}
