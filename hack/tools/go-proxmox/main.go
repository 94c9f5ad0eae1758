// Command go-proxmox-lifecycle drives a Proxmox VE API (pve-sim in this
// project's tests) with go-proxmox, the client CAPMOX uses, through a
// CAPMOX-style machine lifecycle: cluster status, placement by free
// memory, a clone without a VMID, a cloud-init ISO upload, start, wait for
// the guest agent, delete. It prints one line per step and exits non-zero
// on the first failure.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
)

func main() {
	url := flag.String("url", "", "API base URL, https://HOST:PORT/api2/json")
	tokenID := flag.String("token-id", "", "API token ID, user@realm!name")
	ca := flag.String("ca", "", "CA certificate (PEM) to trust")
	template := flag.Int("template", 9000, "VMID of the template to clone")
	flag.Parse()
	secret := os.Getenv("PVE_TOKEN_SECRET")
	if err := run(*url, *tokenID, secret, *ca, *template); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("lifecycle OK")
}

func step(name string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	fmt.Println("ok", name)
	return nil
}

func run(url, tokenID, secret, ca string, templateID int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := proxmox.NewClient(url,
		proxmox.WithAPIToken(tokenID, secret),
		proxmox.WithRootCAFile(ca),
	)

	cluster, err := client.Cluster(ctx)
	if err := step("cluster status", err); err != nil {
		return err
	}
	if len(cluster.Nodes) == 0 {
		return fmt.Errorf("cluster status lists no nodes")
	}

	// Placement: the online node with the most free memory, as CAPMOX does.
	nodes, err := cluster.Resources(ctx, "node")
	if err := step("node resources", err); err != nil {
		return err
	}
	best, free := "", uint64(0)
	for _, n := range nodes {
		if n.Status == "online" && n.MaxMem-n.Mem > free {
			best, free = n.Node, n.MaxMem-n.Mem
		}
	}
	fmt.Printf("placed on %s (%d bytes free)\n", best, free)

	// The template lives on its own node; clone it there (local storage).
	vms, err := cluster.Resources(ctx, "vm")
	if err := step("vm resources", err); err != nil {
		return err
	}
	tplNode := ""
	for _, r := range vms {
		if int(r.VMID) == templateID {
			tplNode = r.Node
		}
	}
	if tplNode == "" {
		return fmt.Errorf("template %d not in /cluster/resources", templateID)
	}
	if tplNode != best {
		return fmt.Errorf("expected placement on the template's node %s, got %s", tplNode, best)
	}
	node, err := client.Node(ctx, best)
	if err := step("node status", err); err != nil {
		return err
	}
	if _, err := node.Containers(ctx); err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	tpl, err := node.VirtualMachine(ctx, templateID)
	if err := step("template", err); err != nil {
		return err
	}
	newid, task, err := tpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{Name: "capmox-machine-1"})
	if err := step(fmt.Sprintf("clone to %d", newid), err); err != nil {
		return err
	}
	if err := step("clone task", task.WaitFor(ctx, 60)); err != nil {
		return err
	}
	if task.IsFailed {
		return fmt.Errorf("clone failed: %s", task.ExitStatus)
	}
	vm, err := node.VirtualMachine(ctx, newid)
	if err := step("clone config", err); err != nil {
		return err
	}
	userdata := "#cloud-config\nhostname: capmox-machine-1\n"
	metadata := fmt.Sprintf("instance-id: %d\nlocal-hostname: capmox-machine-1\n", newid)
	if err := step("cloud-init ISO upload", vm.CloudInit(ctx, "ide0", userdata, metadata, "", "")); err != nil {
		return err
	}
	task, err = vm.Start(ctx)
	if err := step("start", err); err != nil {
		return err
	}
	if err := step("start task", task.WaitFor(ctx, 60)); err != nil {
		return err
	}
	if err := step("guest agent", vm.WaitForAgent(ctx, 60)); err != nil {
		return err
	}
	host, err := vm.AgentGetHostName(ctx)
	if err := step("agent host name "+host, err); err != nil {
		return err
	}
	pid, err := vm.AgentExec(ctx, []string{"cloud-init", "status", "--wait"}, "")
	if err := step("agent exec", err); err != nil {
		return err
	}
	status, err := vm.WaitForAgentExecExit(ctx, pid, 30)
	if err := step("agent exec status", err); err != nil {
		return err
	}
	if status.ExitCode != 0 {
		return fmt.Errorf("cloud-init status exited %d", status.ExitCode)
	}
	task, err = vm.Stop(ctx)
	if err := step("stop", err); err != nil {
		return err
	}
	if err := step("stop task", task.WaitFor(ctx, 60)); err != nil {
		return err
	}
	if err := vm.Ping(ctx); err != nil {
		return fmt.Errorf("refresh: %w", err)
	}
	task, err = vm.Delete(ctx, nil)
	if err := step("delete", err); err != nil {
		return err
	}
	if err := step("delete task", task.WaitFor(ctx, 60)); err != nil {
		return err
	}
	if task.IsFailed {
		return fmt.Errorf("delete failed: %s", task.ExitStatus)
	}
	if _, err := node.VirtualMachine(ctx, newid); err == nil {
		return fmt.Errorf("VM %d still exists after delete", newid)
	}
	return nil
}
