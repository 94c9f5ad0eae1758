"""Drives a Proxmox VE API (pve-sim in this project's tests) with proxmoxer
through a VM's life: create with a disk import and a cloud-init drive, clone,
cloud-init settings, resize, start, the guest agent, a snapshot (which,
as on PVE, keeps the VM's local disks from migrating until it is deleted),
a live migration, stop and delete. Prints one line per step; exits 1 on failure.

usage: lifecycle.py HOST PORT CA_FILE   (token secret in $PVE_TOKEN_SECRET)
"""

import os
import sys
import time

from proxmoxer import ProxmoxAPI
from proxmoxer.core import ResourceException

IMAGE = "local:import/ubuntu-24.04-server-cloudimg-amd64.qcow2"


def wait(px, node, upid, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        status = px.nodes(node).tasks(upid).status.get()
        if status["status"] == "stopped":
            if status["exitstatus"] != "OK":
                raise RuntimeError(f"task {upid} failed: {status['exitstatus']}")
            return
        time.sleep(0.1)
    raise RuntimeError(f"task {upid} did not stop")


def main(host, port, ca):
    px = ProxmoxAPI(
        host,
        port=int(port),
        user="root@pam",
        token_name="sim",
        token_value=os.environ["PVE_TOKEN_SECRET"],
        verify_ssl=ca,
    )
    print("ok version", px.version.get()["version"])
    pve = px.nodes("pve")
    vmid = int(px.cluster.nextid.get())
    upid = pve.qemu.post(
        vmid=vmid,
        name="px-1",
        memory=1024,
        agent=1,
        scsi0=f"local-lvm:0,import-from={IMAGE}",
        ide2="local-lvm:cloudinit",
        net0="virtio,bridge=vmbr0",
    )
    wait(px, "pve", upid)
    print("ok create", vmid)
    clone_id = vmid + 1
    wait(px, "pve", pve.qemu(9000).clone.post(newid=clone_id, name="px-clone"))
    print("ok clone", clone_id)
    pve.qemu(vmid).config.put(ciuser="ci", ipconfig0="ip=192.0.2.50/24,gw=192.0.2.1")
    print("ok cloud-init")
    wait(px, "pve", pve.qemu(vmid).resize.put(disk="scsi0", size="+1G"))
    size = pve.qemu(vmid).config.get()["scsi0"]
    assert "size=4608M" in size, size
    print("ok resize", size)
    wait(px, "pve", pve.qemu(vmid).status.start.post())
    deadline = time.time() + 30
    while True:
        try:
            ifaces = pve.qemu(vmid).agent("network-get-interfaces").get()["result"]
            break
        except ResourceException as e:
            if "QEMU guest agent is not running" not in str(e) or time.time() > deadline:
                raise
            time.sleep(0.1)
    addrs = [a["ip-address"] for i in ifaces for a in i.get("ip-addresses", [])]
    assert "192.0.2.50" in addrs, addrs
    print("ok agent", addrs)
    wait(px, "pve", pve.qemu(vmid).snapshot.post(snapname="before"))
    names = [s["name"] for s in pve.qemu(vmid).snapshot.get()]
    assert "before" in names, names
    print("ok snapshot")
    # PVE cannot move a local LVM-thin disk that a snapshot references.
    refused = pve.qemu(vmid).migrate.post(target="pve2", online=1, **{"with-local-disks": 1})
    try:
        wait(px, "pve", refused)
        raise AssertionError("a migration with a local snapshot succeeded")
    except RuntimeError as e:
        assert "migration aborted" in str(e), e
    wait(px, "pve", pve.qemu(vmid).snapshot("before").delete())
    print("ok snapshot deleted")
    wait(px, "pve", pve.qemu(vmid).migrate.post(target="pve2", online=1, **{"with-local-disks": 1}))
    pve2 = px.nodes("pve2")
    assert pve2.qemu(vmid).status.current.get()["status"] == "running"
    print("ok migrate")
    wait(px, "pve2", pve2.qemu(vmid).status.stop.post())
    wait(px, "pve2", pve2.qemu(vmid).delete())
    wait(px, "pve", pve.qemu(clone_id).delete())
    remaining = [v["vmid"] for v in px.cluster.resources.get(type="vm")]
    assert vmid not in remaining and clone_id not in remaining, remaining
    print("ok delete")
    print("lifecycle OK")


if __name__ == "__main__":
    try:
        main(*sys.argv[1:4])
    except Exception as e:  # report any failure as the test's output
        print("FAIL:", repr(e), file=sys.stderr)
        sys.exit(1)
