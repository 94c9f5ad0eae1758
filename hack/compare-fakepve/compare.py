"""pve-sim and fakepve side by side, measured the same way (scripts/compare-fakepve.sh
runs this with the fakepve venv's python and a release build of pve-sim).

For each server, on loopback, with a ticket login and the same HTTP client:
- probes: black-box checks of behaviours of real PVE that docs/pve-sim.md lists
  (fidelity), and of calls the common clients make (breadth);
- every GET of the PVE 9 API schema, counting the paths answered without 501;
- start-up: wall time and server CPU from spawn to the "listening" line;
- CPU per request: the server process's utime+stime (/proc/PID/stat) over N
  requests, divided by N (the client's own CPU is not counted);
- memory: VmRSS idle and after creating 1,000 VMs through the API.

Prints a Markdown table (and, with --json FILE, the raw figures). Uses only the
standard library; nothing leaves loopback.
"""

import argparse
import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse

import probes

CLK_TCK = os.sysconf("SC_CLK_TCK")
PASSWORD = "compare-secret"  # a throwaway login for a throwaway local server


def cpu_seconds(pid):
    """utime + stime of the process, all its threads, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One simulator process and a keep-alive HTTPS connection to it."""

    def __init__(self, name, argv, node, ready):
        self.name, self.argv, self.node, self.ready = name, argv, node, ready
        self.proc = None
        self.conn = None
        self.ticket = self.csrf = None

    def start(self, workdir):
        out = os.path.join(workdir, self.name + ".out")
        t0 = time.monotonic()
        with open(out, "w") as stdout:
            self.proc = subprocess.Popen(
                self.argv, stdout=stdout, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
            )
        while True:
            with open(out) as f:
                if any(line.startswith(self.ready) for line in f):
                    break
            if self.proc.poll() is not None:
                sys.exit(f"{self.name} exited before listening ({out})")
            if time.monotonic() - t0 > 60:
                sys.exit(f"{self.name} did not start within 60 s")
            time.sleep(0.001)
        self.startup_s = time.monotonic() - t0
        self.startup_cpu_s = cpu_seconds(self.proc.pid)
        self.connect()
        status, _, body = self.req(
            "POST", "/access/ticket", {"username": "root@pam", "password": PASSWORD}, auth=False
        )
        if status != 200:
            sys.exit(f"{self.name}: login failed: {status} {body[:200]!r}")
        data = json.loads(body)["data"]
        self.ticket, self.csrf = data["ticket"], data["CSRFPreventionToken"]

    def stop(self):
        if self.conn:
            self.conn.close()
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def connect(self):
        ctx = ssl.create_default_context()
        # Both serve a certificate made at start-up for loopback; the
        # comparison is about the servers, not about trust.
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        self.conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=60)

    def req(self, method, path, params=None, auth=True, cookie=None, body=None, ctype=None):
        """(status, reason, body bytes) of one /api2/json request."""
        url = "/api2/json" + path
        headers = {}
        if params and method in ("GET", "DELETE"):
            url += "?" + urllib.parse.urlencode(params, doseq=True)
        elif params is not None:
            body = urllib.parse.urlencode(params, doseq=True).encode()
            ctype = "application/x-www-form-urlencoded"
        if ctype:
            headers["Content-Type"] = ctype
        if auth:
            headers["Cookie"] = "PVEAuthCookie=" + self.ticket
            if method != "GET":
                headers["CSRFPreventionToken"] = self.csrf
        if cookie is not None:
            headers["Cookie"] = cookie
        for attempt in (0, 1):
            try:
                self.conn.request(method, url, body=body, headers=headers)
                resp = self.conn.getresponse()
                return resp.status, resp.reason, resp.read()
            except (http.client.HTTPException, ConnectionError):
                if attempt:
                    raise
                self.conn.close()
                self.connect()

    def data(self, method, path, params=None):
        status, reason, body = self.req(method, path, params)
        if status != 200:
            raise probes.Unexpected(f"{method} {path}: {status} {reason}")
        return json.loads(body)["data"]

    def wait_task(self, upid, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.data("GET", f"/nodes/{self.node}/tasks/{upid}/status")
            if st.get("status") == "stopped":
                return st.get("exitstatus")
            time.sleep(0.02)
        raise probes.Unexpected(f"task {upid} still running after {timeout} s")

    def cpu_per_request(self, n, method, path, params=None):
        """Server CPU (µs) per request over n requests, after a warm-up."""
        for _ in range(min(n // 10, 200)):
            self.req(method, path, params)
        before = cpu_seconds(self.proc.pid)
        for _ in range(n):
            status, reason, _ = self.req(method, path, params)
            if status != 200:
                raise probes.Unexpected(f"{method} {path}: {status} {reason}")
        return (cpu_seconds(self.proc.pid) - before) / n * 1e6


def servers(args, workdir):
    sim_port, fake_port = free_port(), free_port()
    sim = Server(
        "pve-sim",
        [args.pve_sim, "--listen", f"127.0.0.1:{sim_port}", "--nodes", "pve,pve2",
         "--time-scale", str(args.time_scale), "--user", f"root@pam:{PASSWORD}"],
        "pve",
        "listening on",
    )
    guests = os.path.join(workdir, "guests.json")
    with open(guests, "w") as f:
        # fakepve has one node, pve1; a guest on pve2 adds the second node
        # pve-sim gets from --nodes (migration needs one).
        json.dump({"guests": [{"vmid": 9999, "name": "on-pve2", "node": "pve2"}]}, f)
    fake = Server(
        "fakepve",
        [sys.executable, "-m", "fakepve", guests, "--host", "127.0.0.1", "--port", str(fake_port),
         "--time-scale", str(args.time_scale), "--password", PASSWORD],
        "pve1",
        "fakepve listening on",
    )
    sim.port, fake.port = sim_port, fake_port
    return [sim, fake]


def schema_walk(server, schema):
    """GETs of the schema answered with something other than 501."""
    values = {"node": server.node, "vmid": "100", "storage": "local"}
    answered = total = 0
    for path, methods in schema["paths"].items():
        if "GET" not in methods:
            continue
        total += 1
        filled = path
        for part in path.split("/"):
            if part.startswith("{") and part.endswith("}"):
                filled = filled.replace(part, values.get(part[1:-1], "x"), 1)
        status, _, _ = server.req("GET", filled)
        answered += status != 501
    return answered, total


def measure(server, args, schema):
    r = {"startup_ms": server.startup_s * 1e3, "startup_cpu_ms": server.startup_cpu_s * 1e3,
         "rss_idle_mib": rss_mib(server.proc.pid)}
    probes.create_fixture(server)
    r["probes"] = probes.run(server)
    if schema:
        r["schema_get_answered"], r["schema_get_total"] = schema_walk(server, schema)
    r["cpu_us_version"] = server.cpu_per_request(args.requests, "GET", "/version")
    r["cpu_us_status"] = server.cpu_per_request(
        args.requests, "GET", f"/nodes/{server.node}/qemu/100/status/current")
    # 1,000 VMs, created through the API as a client would.
    before = cpu_seconds(server.proc.pid)
    upids = []
    for i in range(args.vms):
        upids.append(server.data("POST", f"/nodes/{server.node}/qemu",
                                 {"vmid": str(1000 + i), "name": f"vm-{i}", "memory": "512"}))
    for upid in upids:
        server.wait_task(upid)
    r["cpu_us_create"] = (cpu_seconds(server.proc.pid) - before) / args.vms * 1e6
    r["rss_vms_mib"] = rss_mib(server.proc.pid)
    r["cpu_us_resources"] = server.cpu_per_request(
        max(args.requests // 25, 20), "GET", "/cluster/resources", {"type": "vm"})
    return r


def table(names, results, args):
    def row(label, key, fmt):
        cells = [fmt(results[n][key]) if key in results[n] else "n/a" for n in names]
        return f"| {label} | " + " | ".join(cells) + " |"

    def probes_passed(kind):
        def fmt_probe(n):
            got = [p for p in results[n]["probes"] if p["kind"] == kind]
            return f"{sum(p['ok'] for p in got)}/{len(got)}"
        return fmt_probe

    lines = ["| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    lines.append("| PVE behaviours probed (fidelity) | "
                 + " | ".join(probes_passed("fidelity")(n) for n in names) + " |")
    lines.append("| client calls probed (breadth) | "
                 + " | ".join(probes_passed("breadth")(n) for n in names) + " |")
    lines.append("| GETs of the PVE 9 schema not answered 501 | " + " | ".join(
        f"{results[n]['schema_get_answered']}/{results[n]['schema_get_total']}"
        if "schema_get_total" in results[n] else "n/a" for n in names) + " |")
    us = lambda v: f"{v:.0f} µs"  # noqa: E731
    # /proc CPU times tick at CLK_TCK (100 Hz): below one tick is "< 10 ms".
    ms = lambda v: f"{v:.0f} ms" if v else f"< {1000 // CLK_TCK} ms"  # noqa: E731
    mib = lambda v: f"{v:.0f} MiB"  # noqa: E731
    lines += [
        row("start-up to listening (wall)", "startup_ms", ms),
        row("start-up CPU", "startup_cpu_ms", ms),
        row("CPU per request, `GET /version`", "cpu_us_version", us),
        row("CPU per request, `GET .../qemu/100/status/current`", "cpu_us_status", us),
        row(f"CPU per VM create ({args.vms} `POST /nodes/{{node}}/qemu`, task included)",
            "cpu_us_create", us),
        row(f"CPU per `GET /cluster/resources?type=vm` with {args.vms} VMs", "cpu_us_resources", us),
        row("memory (RSS) idle", "rss_idle_mib", mib),
        row(f"memory (RSS) with {args.vms} VMs", "rss_vms_mib", mib),
    ]
    probe_lines = ["", "| probe | kind | " + " | ".join(names) + " |",
                   "|---|---|" + "---|" * len(names)]
    first = results[names[0]]["probes"]
    for i, p in enumerate(first):
        cells = []
        for n in names:
            q = results[n]["probes"][i]
            cells.append(("pass" if q["ok"] else "FAIL") + (f" ({q['note']})" if q["note"] else ""))
        probe_lines.append(f"| {p['name']} | {p['kind']} | " + " | ".join(cells) + " |")
    return "\n".join(lines + probe_lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pve-sim", required=True, help="the pve-sim binary (a release build)")
    ap.add_argument("--schema", help="the PVE API schema JSON (hack/tools/ensure.sh pve-api-schema)")
    ap.add_argument("--requests", type=int, default=5000, help="requests per CPU measurement")
    ap.add_argument("--vms", type=int, default=1000)
    ap.add_argument("--time-scale", type=float, default=0.01)
    ap.add_argument("--json", help="also write the raw figures here")
    args = ap.parse_args()
    schema = None
    if args.schema:
        with open(args.schema) as f:
            schema = json.load(f)
    results = {}
    with tempfile.TemporaryDirectory(prefix="compare-fakepve-") as workdir:
        for server in servers(args, workdir):
            try:
                server.start(workdir)
                results[server.name] = measure(server, args, schema)
            finally:
                server.stop()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPUs, load average {load:.1f} at the end; "
          f"{args.requests} requests per CPU figure, time scale {args.time_scale}\n")
    print(table(list(results), results, args))


if __name__ == "__main__":
    main()
