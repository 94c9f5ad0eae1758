"""The probes compare.py runs against each server: black-box HTTP checks of
what real PVE does, each stated with the PVE source it follows.

"fidelity" probes are the behaviours docs/pve-sim.md lists as differing from
fakepve; "breadth" probes are calls the common clients (go-proxmox/CAPMOX,
proxmoxer, community.proxmox) make. All run against VM 100, which
create_fixture makes through the API on the server's first node.
"""

import hashlib
import json
import time
import urllib.parse
import uuid

IMAGE = "local:import/ubuntu-24.04-server-cloudimg-amd64.qcow2"
PROBES = []


class Unexpected(Exception):
    """A probe saw an answer it cannot go on from."""


def probe(kind, name):
    def register(fn):
        PROBES.append((kind, name, fn))
        return fn
    return register


def create_fixture(s):
    upid = s.data("POST", f"/nodes/{s.node}/qemu", {
        "vmid": "100", "name": "probe-1", "memory": "2048", "agent": "1",
        "scsi0": "local-lvm:1", "ide2": "local-lvm:cloudinit", "net0": "virtio,bridge=vmbr0"})
    s.fixture_upid = upid
    if s.wait_task(upid) != "OK":
        raise Unexpected("the fixture VM could not be created")


def run(s):
    results = []
    for kind, name, fn in PROBES:
        try:
            ok, note = fn(s)
        except Exception as e:  # a probe that cannot finish has failed
            ok, note = False, str(e)[:80]
        results.append({"kind": kind, "name": name, "ok": bool(ok), "note": note})
    return results


def body_json(body):
    try:
        return json.loads(body)
    except ValueError:
        return {}


# --- fidelity: what PVE does that a fake easily gets wrong ---------------------------


@probe("fidelity", "no credentials: 401 with an empty body (pve-http-server)")
def no_credentials(s):
    status, _, body = s.req("GET", "/nodes", auth=False)
    return status == 401 and body == b"", f"{status}, {len(body)} bytes"


@probe("fidelity", "unknown path: 501 (pve-http-server)")
def unknown_path(s):
    status, _, _ = s.req("GET", "/no/such/path")
    return status == 501, str(status)


@probe("fidelity", "URL-encoded ticket cookie accepted (pve-http-server)")
def urlencoded_cookie(s):
    cookie = "PVEAuthCookie=" + urllib.parse.quote(s.ticket, safe="")
    status, _, _ = s.req("GET", "/version", auth=False, cookie=cookie)
    return status == 200, str(status)


@probe("fidelity", "create with a disk import holds `lock: create` until it is done (qemu-server)")
def lock_during_import(s):
    upid = s.data("POST", f"/nodes/{s.node}/qemu", {
        "vmid": "150", "memory": "512", "scsi0": f"local-lvm:0,import-from={IMAGE}"})
    during = s.data("GET", f"/nodes/{s.node}/qemu/150/config")
    exit_status = s.wait_task(upid)
    after = s.data("GET", f"/nodes/{s.node}/qemu/150/config")
    ok = during.get("lock") == "create" and exit_status == "OK" and "lock" not in after
    return ok, f"lock {during.get('lock')!r} while importing, task {exit_status}"


@probe("fidelity", "task log `limit=0` returns the whole log (pve-common dump_logfile)")
def task_log_limit_zero(s):
    lines = s.data("GET", f"/nodes/{s.node}/tasks/{s.fixture_upid}/log", {"limit": "0"})
    last = lines[-1]["t"] if lines else None
    return last == "TASK OK", f"{len(lines)} lines, last {last!r}"


@probe("fidelity", "`cipassword` reads back as `**********` (qemu-server)")
def cipassword_masked(s):
    s.data("PUT", f"/nodes/{s.node}/qemu/100/config", {"cipassword": "probe-password"})
    value = s.data("GET", f"/nodes/{s.node}/qemu/100/config").get("cipassword")
    return value == "**********", repr(value)


@probe("fidelity", "booleans are 0/1 only: `onboot=true` is 400 (PVE::JSONSchema)")
def strict_boolean(s):
    status, _, body = s.req("PUT", f"/nodes/{s.node}/qemu/100/config", {"onboot": "true"})
    errors = body_json(body).get("errors") or {}
    return status == 400 and "onboot" in errors, str(status)


@probe("fidelity", "download-url refuses `.img` for `import` content (pve-storage)")
def img_not_import(s):
    status, _, body = s.req("POST", f"/nodes/{s.node}/storage/local/download-url", {
        "content": "import", "filename": "disk.img", "url": "https://images.invalid/disk.img"})
    errors = body_json(body).get("errors") or {}
    return status == 400 and "filename" in errors, str(status)


@probe("fidelity", "a malformed UPID is 400 (pve-manager Tasks)")
def malformed_upid(s):
    status, _, _ = s.req("GET", f"/nodes/{s.node}/tasks/not-a-upid/status")
    return status == 400, str(status)


@probe("fidelity", "a snapshot keeps a local LVM-thin disk from migrating (qemu-server QemuMigrate)")
def snapshot_pins_local_disk(s):
    upid = s.data("POST", f"/nodes/{s.node}/qemu/100/snapshot", {"snapname": "pin"})
    if s.wait_task(upid) != "OK":
        raise Unexpected("snapshot failed")
    upid = s.data("POST", f"/nodes/{s.node}/qemu/100/migrate", {"target": "pve2"})
    exit_status = s.wait_task(upid)
    upid = s.data("DELETE", f"/nodes/{s.node}/qemu/100/snapshot/pin")
    s.wait_task(upid)
    return exit_status == "migration aborted", repr(exit_status)


# --- breadth: what the common clients call --------------------------------------------


@probe("breadth", "`GET /cluster/status` lists the nodes (go-proxmox Client.Cluster)")
def cluster_status(s):
    data = s.data("GET", "/cluster/status")
    return any(e.get("type") == "node" for e in data), f"{len(data)} entries"


@probe("breadth", "`GET /nodes/{node}/lxc` (CAPMOX placement)")
def lxc_list(s):
    return isinstance(s.data("GET", f"/nodes/{s.node}/lxc"), list), ""


@probe("breadth", "`GET /cluster/nextid` is a string (PVE returns the VMID as text)")
def nextid_string(s):
    value = s.data("GET", "/cluster/nextid")
    return isinstance(value, str), repr(value)


@probe("breadth", "node memory follows the running VMs (placement by free memory)")
def node_memory_follows_vms(s):
    before = s.data("GET", f"/nodes/{s.node}/status")["memory"]["used"]
    if s.wait_task(s.data("POST", f"/nodes/{s.node}/qemu/100/status/start")) != "OK":
        raise Unexpected("start failed")
    after = s.data("GET", f"/nodes/{s.node}/status")["memory"]["used"]
    return after - before >= 2 << 30, f"+{(after - before) >> 20} MiB for a 2 GiB VM"


@probe("breadth", "guest agent `get-osinfo` once the guest is up (CAPMOX agent wait)")
def agent_osinfo(s):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status, _, body = s.req("GET", f"/nodes/{s.node}/qemu/100/agent/get-osinfo")
        if status == 200:
            return "result" in body_json(body).get("data", {}), ""
        time.sleep(0.05)
    return False, f"last {status}"


@probe("breadth", "guest agent `exec` + `exec-status` (go-proxmox AgentExec)")
def agent_exec(s):
    started = s.data("POST", f"/nodes/{s.node}/qemu/100/agent/exec",
                     {"command": ["echo", "hello"]})
    status = s.data("GET", f"/nodes/{s.node}/qemu/100/agent/exec-status",
                    {"pid": str(started["pid"])})
    return status.get("exited") == 1 and "hello" in status.get("out-data", ""), ""


@probe("breadth", "multipart ISO upload with a checksum (CAPMOX cloud-init ISO)")
def upload_iso(s):
    data = bytes(range(256)) * 400
    boundary = uuid.uuid4().hex
    parts = []
    for name, value in (("content", "iso"), ("checksum-algorithm", "sha256"),
                        ("checksum", hashlib.sha256(data).hexdigest())):
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                     f"{value}\r\n".encode())
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="filename"; '
                 f'filename="probe.iso"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode()
                 + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    status, reason, body = s.req("POST", f"/nodes/{s.node}/storage/local/upload",
                                 body=b"".join(parts),
                                 ctype=f"multipart/form-data; boundary={boundary}")
    if status != 200:
        return False, f"{status} {reason}"
    s.wait_task(body_json(body)["data"])
    content = s.data("GET", f"/nodes/{s.node}/storage/local/content", {"content": "iso"})
    return any(v["volid"] == "local:iso/probe.iso" for v in content), ""


@probe("breadth", "snapshot list ends with `current` (proxmox_snap, proxmoxer)")
def snapshot_list(s):
    upid = s.data("POST", f"/nodes/{s.node}/qemu/100/snapshot", {"snapname": "s1"})
    s.wait_task(upid)
    names = [e["name"] for e in s.data("GET", f"/nodes/{s.node}/qemu/100/snapshot")]
    return names[-1:] == ["current"] and "s1" in names, repr(names)


@probe("breadth", "migrate precondition `GET .../migrate` (proxmox_kvm, the GUI)")
def migrate_precondition(s):
    data = s.data("GET", f"/nodes/{s.node}/qemu/100/migrate")
    ok = isinstance(data, dict) and "allowed_nodes" in data and "local_disks" in data
    return ok, "" if ok else f"got {json.dumps(data)[:60]}"


@probe("breadth", "pools: create and list (proxmox_pool)")
def pools(s):
    s.data("POST", "/pools", {"poolid": "probe"})
    return any(p.get("poolid") == "probe" for p in s.data("GET", "/pools")), ""


@probe("breadth", "`GET /cluster/ha/resources` (proxmox_cluster_ha_resources)")
def ha_resources(s):
    return isinstance(s.data("GET", "/cluster/ha/resources"), list), ""
