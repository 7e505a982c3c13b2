#!/usr/bin/python3
"""Google's own gcloud (the Cloud SDK installed on this machine, unmodified) against the mock cloud. Run by
run_client.py, which sets the JOBMAN_* variables and checks every TPU API response gcloud got.

    gcloud_client.py [--gcloud /usr/bin/gcloud]

gcloud gets a configuration directory and a HOME of its own (temporary), no prompts, no update checks and no usage
reports, and reaches only 127.0.0.1: the TPU and Compute APIs through api_endpoint_overrides, the token endpoint
through the key file's token_uri, and any other address through a proxy that refuses every connection; its ssh and
scp reach the worker hosts' addresses, which the flow checks are on this machine's loopback (127.0.0.0/8) before it
connects. It logs in with the mock's service-account key, then runs the commands of the flow below, each checked for
what it printed.
Every part runs even when an earlier one failed, so that one run names every command that fails.
"""

import argparse
import base64
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time

DEADLINE_S = 120
# States of nodes and queued resources that only a request changes.
RESTING_STATES = {"SUSPENDED", "FAILED", "PREEMPTED", "TERMINATED", "STOPPED"}
# The zone of gcloud-world.yaml with flex-start capacity (v6e).
FLEX_START_ZONE = "us-east5-a"
# A port nothing listens on: gcloud's HTTPS proxy, so that a request to any address but 127.0.0.1 fails at once.
CLOSED_PORT = 9


class Failure(Exception):
    """A command that failed, or printed what it should not have."""


class Gcloud:
    """Runs gcloud with a configuration of its own, pointed at the mock."""

    def __init__(self, binary, scratch, root_url, project):
        config = os.path.join(scratch, "gcloud-config")
        home = os.path.join(scratch, "gcloud-home")
        os.makedirs(config)
        os.makedirs(home)
        self.binary = binary
        self.calls = 0
        # Nothing of the machine's user: only the variables a process needs, then gcloud's properties as variables
        # (CLOUDSDK_<SECTION>_<PROPERTY>), which gcloud reads before its configuration files.
        self.env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR")}
        self.env.update({
            "HOME": home,
            "CLOUDSDK_CONFIG": config,
            "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
            "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING": "true",
            "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK": "true",
            "CLOUDSDK_CORE_CHECK_GCE_METADATA": "false",
            "CLOUDSDK_CORE_PROJECT": project,
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU": root_url,
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE": root_url + "compute/v1/",
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_OSLOGIN": root_url + "oslogin/",
            "HTTPS_PROXY": f"http://127.0.0.1:{CLOSED_PORT}",
            "HTTP_PROXY": f"http://127.0.0.1:{CLOSED_PORT}",
            "https_proxy": f"http://127.0.0.1:{CLOSED_PORT}",
            "http_proxy": f"http://127.0.0.1:{CLOSED_PORT}",
            "NO_PROXY": "127.0.0.1",
            "no_proxy": "127.0.0.1",
        })

    def run(self, *args, expect_failure=False):
        """Runs `gcloud ARGS --format=json`; returns the parsed output (None when empty). Raises Failure when it exits
        non-zero (or zero, with expect_failure), with what it printed on stderr."""
        command = [self.binary, *args, "--format=json"]
        self.calls += 1
        result = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=DEADLINE_S)
        shown = "gcloud " + " ".join(args)
        if (result.returncode != 0) != expect_failure:
            raise Failure(f"{shown}: exit {result.returncode}\n{result.stderr.strip()}")
        if expect_failure:
            return result.stderr
        try:
            return json.loads(result.stdout) if result.stdout.strip() else None
        except ValueError:
            raise Failure(f"{shown}: printed no JSON: {result.stdout[:300]!r}") from None

    def run_text(self, *args):
        """Runs `gcloud ARGS` (ssh or scp); returns what it printed on stdout. Raises Failure when it exits non-zero,
        with what it printed on stderr."""
        self.calls += 1
        result = subprocess.run([self.binary, *args], env=self.env, capture_output=True, text=True,
                                timeout=DEADLINE_S, stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            raise Failure(f"gcloud {' '.join(args)}: exit {result.returncode}\n{result.stderr.strip()}")
        return result.stdout

    def parallel(self, *calls):
        """Runs several independent commands (each a tuple of arguments) at once; returns their outputs in order, or
        raises the first Failure once all have ended."""
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(calls)) as pool:
            futures = [pool.submit(self.run, *call) for call in calls]
            concurrent.futures.wait(futures)
        return [future.result() for future in futures]


def expect(condition, message):
    if not condition:
        raise Failure(message)


def short(name):
    """The last segment of a resource name."""
    return name.rsplit("/", 1)[-1]


class Flow:
    def __init__(self, gcloud, project, zone, key_file):
        self.g = gcloud
        self.project = project
        self.zone = zone
        self.key_file = key_file
        self.failures = []

    def part(self, name, fn):
        started = time.monotonic()
        try:
            fn()
            print(f"ok   {name} ({time.monotonic() - started:.1f} s)", flush=True)
        except Failure as e:
            self.failures.append(name)
            print(f"FAIL {name}: {e}", flush=True)

    def wait_for_state(self, what, describe, state):
        """Polls `gcloud ... describe` until its state is `state`; returns the last description. A state it cannot
        leave by itself, or the deadline, fails."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            out = self.g.run(*describe)
            current = out.get("state")
            current = current.get("state") if isinstance(current, dict) else current
            if current == state:
                return out
            if current in RESTING_STATES or time.monotonic() > deadline:
                raise Failure(f"{what} is {current}, not {state}: {out}")

    def login(self):
        self.g.run("auth", "activate-service-account", "--key-file", self.key_file)
        with open(self.key_file, encoding="utf-8") as f:
            email = json.load(f)["client_email"]
        accounts = self.g.run("auth", "list")
        active = [a["account"] for a in accounts or [] if a.get("status") == "ACTIVE"]
        expect(active == [email], f"auth list: active accounts {active}, expected [{email}]")

    def offer(self):
        zone = ["--zone", self.zone]
        types, versions = self.g.parallel(("compute", "tpus", "tpu-vm", "accelerator-types", "list", *zone),
                                          ("compute", "tpus", "tpu-vm", "versions", "list", *zone))
        type_names = {t.get("type") for t in types}
        expect({"v4-8", "v4-32"} <= type_names, f"accelerator-types list: no v4-8 or v4-32 in {sorted(type_names)}")
        expect(all(t["name"].startswith(f"projects/{self.project}/locations/{self.zone}/acceleratorTypes/")
                   for t in types), "accelerator-types list: names outside the zone")
        version_names = {v.get("version") for v in versions}
        expect("tpu-ubuntu2204-base" in version_names, f"versions list: {sorted(version_names)}")

    def nodes(self):
        zone = ["--zone", self.zone]
        node = "gcloud-node"
        created = self.g.run("compute", "tpus", "tpu-vm", "create", node, *zone, "--accelerator-type", "v4-8",
                             "--version", "tpu-ubuntu2204-base")
        expect(created and short(created.get("name", "")) == node, f"tpu-vm create printed {created}")
        described = self.wait_for_state(node, ("compute", "tpus", "tpu-vm", "describe", node, *zone), "READY")
        expect(described.get("acceleratorType") == "v4-8" and described.get("runtimeVersion") == "tpu-ubuntu2204-base",
               f"tpu-vm describe: {described}")
        listed = self.g.run("compute", "tpus", "tpu-vm", "list", *zone)
        expect(node in [short(n["name"]) for n in listed], f"tpu-vm list: no {node} in {listed}")
        self.g.run("compute", "tpus", "tpu-vm", "delete", node, *zone, "--quiet")
        error = self.g.run("compute", "tpus", "tpu-vm", "describe", node, *zone, expect_failure=True)
        expect("NOT_FOUND" in error or "not found" in error.lower(), f"describe after delete: {error}")

    def queued_resources(self):
        zone = ["--zone", self.zone]
        qr = ["compute", "tpus", "queued-resources"]
        common = [*zone, "--accelerator-type", "v4-8", "--runtime-version", "tpu-ubuntu2204-base", "--spot"]
        self.g.parallel((*qr, "create", "gcloud-qr", *common, "--node-id", "gcloud-qr-node"),
                        (*qr, "create", "gcloud-ms", *common, "--node-count", "2", "--node-prefix", "ms"))
        single = self.wait_for_state("gcloud-qr", (*qr, "describe", "gcloud-qr", *zone), "ACTIVE")
        spec = single["tpu"]["nodeSpec"]
        expect(len(spec) == 1 and spec[0].get("nodeId") == "gcloud-qr-node" and "spot" in single,
               f"queued-resources describe gcloud-qr: {single}")
        multi = self.wait_for_state("gcloud-ms", (*qr, "describe", "gcloud-ms", *zone), "ACTIVE")
        spec = multi["tpu"]["nodeSpec"]
        expect(len(spec) == 1 and spec[0].get("multisliceParams") == {"nodeCount": 2, "nodeIdPrefix": "ms"}
               and "nodeId" not in spec[0], f"queued-resources describe gcloud-ms: nodeSpec {spec}")
        listed, nodes = self.g.parallel((*qr, "list", *zone), ("compute", "tpus", "tpu-vm", "list", *zone))
        names = sorted(short(q["name"]) for q in listed)
        expect(names == ["gcloud-ms", "gcloud-qr"], f"queued-resources list: {names}")
        by_name = {short(n["name"]): n for n in nodes}
        expect(sorted(by_name) == ["gcloud-qr-node", "ms-0", "ms-1"], f"tpu-vm list: {sorted(by_name)}")
        for name in ("ms-0", "ms-1"):
            node = by_name[name]
            expect(node.get("state") == "READY" and node.get("multisliceNode") is True
                   and short(node.get("queuedResource", "")) == "gcloud-ms", f"{name}: {node}")
        expect("multisliceNode" not in by_name["gcloud-qr-node"], f"gcloud-qr-node: {by_name['gcloud-qr-node']}")
        self.g.parallel((*qr, "delete", "gcloud-qr", *zone, "--force", "--quiet"),
                        (*qr, "delete", "gcloud-ms", *zone, "--force", "--quiet"))
        left = self.g.run("compute", "tpus", "tpu-vm", "list", *zone)
        expect(not left, f"tpu-vm list after the deletes: {[short(n['name']) for n in left]}")
        left = self.g.run(*qr, "list", *zone)
        expect(not left, f"queued-resources list after the deletes: {[short(q['name']) for q in left]}")

    def provisioning_models(self):
        """`gcloud alpha` (v2alpha1): flex-start with its run duration, best-effort, a reservation asked for with
        --reserved and by name, reservations list, and the alpha list and delete."""
        qr = ["alpha", "compute", "tpus", "queued-resources"]
        zone = ["--zone", self.zone]
        east = ["--zone", FLEX_START_ZONE]
        v4 = [*zone, "--accelerator-type", "v4-8", "--runtime-version", "tpu-ubuntu2204-base"]
        # 72 hours: 259 s at the mock's time scale of 1000. The 3 hours this asked for ended in 10.8 s, and on a busy
        # machine the slice was SUSPENDED (its run over) before gcloud had described it ACTIVE.
        self.g.parallel(
            (*qr, "create", "flex", *east, "--accelerator-type", "v6e-8", "--runtime-version", "v2-alpha-tpuv6e",
             "--node-id", "flex-node", "--provisioning-model=FLEX-START", "--max-run-duration=72h"),
            (*qr, "create", "best", *v4, "--node-id", "best-node", "--best-effort"),
            (*qr, "create", "reserved", *v4, "--node-id", "reserved-node", "--reserved"),
            (*qr, "create", "by-name", *v4, "--node-id", "by-name-node", "--reservation", "lab-v4"))
        flex = self.wait_for_state("flex", (*qr, "describe", "flex", *east), "ACTIVE")
        run = flex.get("runDuration", {})
        expect(flex.get("provisioningModel") == "FLEX_START" and run.get("maxRunDuration") == "259200s"
               and "terminationTime" in run, f"queued-resources describe flex: {flex}")
        best = self.wait_for_state("best", (*qr, "describe", "best", *zone), "ACTIVE")
        expect("bestEffort" in best and "spot" not in best, f"queued-resources describe best: {best}")
        reservation = f"projects/{self.project}/locations/{self.zone}/reservations/lab-v4"
        for name in ("reserved", "by-name"):
            described = self.wait_for_state(name, (*qr, "describe", name, *zone), "ACTIVE")
            expect(described.get("reservationName") == reservation,
                   f"queued-resources describe {name}: {described}")
        reservations = self.g.run("alpha", "compute", "tpus", "reservations", "list", *zone)
        expect([short(r["name"]) for r in reservations] == ["lab-v4"]
               and reservations[0]["standard"].get("size") == 8
               and reservations[0]["standard"].get("usage", {}).get("total") == "8",
               f"reservations list: {reservations}")
        listed, nodes = self.g.parallel((*qr, "list", *zone), ("alpha", "compute", "tpus", "tpu-vm", "list", *zone))
        expect(sorted(short(q["name"]) for q in listed) == ["best", "by-name", "reserved"],
               f"alpha queued-resources list: {[short(q['name']) for q in listed]}")
        by_name = {short(n["name"]): n for n in nodes}
        expect(sorted(by_name) == ["best-node", "by-name-node", "reserved-node"],
               f"alpha tpu-vm list: {sorted(by_name)}")
        expect(by_name["reserved-node"].get("schedulingConfig", {}).get("reservationName") == reservation,
               f"reserved-node: {by_name['reserved-node']}")
        deletes = [(*qr, "delete", name, *zone, "--force", "--quiet") for name in ("best", "reserved", "by-name")]
        self.g.parallel(*deletes, (*qr, "delete", "flex", *east, "--force", "--quiet"))
        left = self.g.run(*qr, "list", *zone) or []
        expect(not left, f"alpha queued-resources list after the deletes: {[short(q['name']) for q in left]}")

    def project_metadata(self):
        info = self.g.run("compute", "project-info", "describe")
        expect(info.get("name") == self.project and info.get("kind") == "compute#project",
               f"project-info describe: {info}")
        common = info.get("commonInstanceMetadata", {})
        expect(common.get("kind") == "compute#metadata" and common.get("fingerprint"),
               f"project-info describe: commonInstanceMetadata {common}")
        self.g.run("compute", "project-info", "add-metadata", "--metadata", "team=lab,enable-oslogin=FALSE")
        self.g.run("compute", "project-info", "remove-metadata", "--keys", "team")
        info = self.g.run("compute", "project-info", "describe")
        items = {i["key"]: i["value"] for i in info["commonInstanceMetadata"].get("items", [])}
        expect(items == {"enable-oslogin": "FALSE"}, f"project metadata after add and remove: {items}")
        expect(info["commonInstanceMetadata"]["fingerprint"] != common["fingerprint"],
               "the fingerprint did not change with the metadata")

    def os_login(self):
        # An ed25519 public key in OpenSSH's format (what `ssh-keygen -t ed25519` writes; nothing signs with it).
        blob = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + bytes(range(32))
        public_key = "ssh-ed25519 " + base64.b64encode(blob).decode() + " tester@lab"
        key_file = os.path.join(self.g.env["HOME"], "id_ed25519.pub")
        with open(key_file, "w", encoding="utf-8") as f:
            f.write(public_key + "\n")
        before = self.g.run("compute", "os-login", "describe-profile")
        expect(not before.get("posixAccounts") and not before.get("sshPublicKeys"), f"a fresh profile: {before}")
        added = self.g.run("compute", "os-login", "ssh-keys", "add", "--key-file", key_file)
        accounts = added["loginProfile"].get("posixAccounts", [])
        expect(len(accounts) == 1 and accounts[0].get("accountId") == self.project
               and accounts[0]["username"].startswith("sa_") and accounts[0].get("primary") is True,
               f"ssh-keys add: POSIX accounts {accounts}")
        profile = self.g.run("compute", "os-login", "describe-profile")
        keys = [k["key"] for k in profile.get("sshPublicKeys", {}).values()]
        expect(keys == [public_key], f"describe-profile: keys {keys}")
        expect([a["username"] for a in profile.get("posixAccounts", [])] == [accounts[0]["username"]],
               f"describe-profile: POSIX accounts {profile.get('posixAccounts')}")


    def trust_host_keys(self, node):
        """Writes the keys node's workers publish in their guest attributes to gcloud's known-hosts file, under the
        alias gcloud checks them under (tpu.ID-WORKER-SUFFIX), so that --strict-host-key-checking=yes holds from the
        first connection; returns the node's description. Fails unless every address of the node is on this machine's
        loopback: a real ssh connects wherever the API says."""
        zone = ["--zone", self.zone]
        described = self.g.run("compute", "tpus", "tpu-vm", "describe", node, *zone)
        for endpoint in described.get("networkEndpoints", []):
            addresses = [endpoint.get("ipAddress", ""), endpoint.get("accessConfig", {}).get("externalIp", "")]
            expect(all(a.startswith("127.") for a in addresses if a) and addresses[0],
                   f"{node}: an address outside 127.0.0.0/8: {endpoint}")
        attributes = self.g.run("compute", "tpus", "tpu-vm", "get-guest-attributes", node, *zone)
        keys = {a["worker_id"]: a["value"] for a in attributes
                if a.get("namespace") == "hostkeys" and a.get("key") == "ssh-ed25519"}
        workers = len(described["networkEndpoints"])
        expect(sorted(keys) == list(range(workers)), f"{node}: host keys of workers {sorted(keys)} of {workers}")
        path = os.path.join(self.g.env["HOME"], ".ssh", "google_compute_known_hosts")
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            for worker, key in sorted(keys.items()):
                f.write(f"tpu.{described['id']}-{worker}-{key[-6:]} {key}\n")
        return described

    def ssh_and_scp(self):
        zone = ["--zone", self.zone]
        qr = ["compute", "tpus", "queued-resources"]
        # One slice of two hosts. (queued-resources ssh reaches the nodes its nodeSpec names by nodeId; a multislice
        # request, which names them with multiNodeParams, it cannot.)
        self.g.run(*qr, "create", "gcloud-sh", *zone, "--accelerator-type", "v4-16", "--runtime-version",
                   "tpu-ubuntu2204-base", "--spot", "--node-id", "sh-node")
        self.wait_for_state("gcloud-sh", (*qr, "describe", "gcloud-sh", *zone), "ACTIVE")
        self.trust_host_keys("sh-node")
        known_hosts = os.path.join(self.g.env["HOME"], ".ssh", "google_compute_known_hosts")
        with open(known_hosts, encoding="utf-8") as f:
            trusted = f.read()
        strict = "--strict-host-key-checking=yes"
        try:
            out = self.g.run_text("compute", "tpus", "tpu-vm", "ssh", "tester@sh-node", *zone, "--worker=all", strict,
                                  "--command=hostname; echo $HOME")
            # gcloud makes its key first (ssh-keygen's report, on stdout, ends with the randomart's bottom line).
            expect(out.startswith("Generating public/private rsa key pair.") and "+----[SHA256]-----+\n" in out,
                   f"tpu-vm ssh: gcloud did not make its key: {out!r}")
            expect(os.path.exists(os.path.join(self.g.env["HOME"], ".ssh", "google_compute_engine")),
                   "tpu-vm ssh: no ~/.ssh/google_compute_engine in gcloud's HOME")
            out = out.split("+----[SHA256]-----+\n", 1)[1]
            lines = sorted(out.split())
            expect(len(lines) == 4 and lines[:2] == ["/home/tester", "/home/tester"]
                   and re.fullmatch(r"t1v-n-[0-9a-f]{8}-w-0", lines[2])
                   and re.fullmatch(r"t1v-n-[0-9a-f]{8}-w-1", lines[3]) and lines[2][:-1] == lines[3][:-1],
                   f"tpu-vm ssh --worker=all: every worker should print its hostname and HOME, printed {out!r}")

            payload = os.path.join(self.g.env["HOME"], "payload.txt")
            with open(payload, "w", encoding="utf-8") as f:
                f.write("copied by gcloud scp\n")
            self.g.run_text("compute", "tpus", "tpu-vm", "scp", payload, "tester@sh-node:payload-copy.txt", *zone,
                            "--worker=all", strict)
            out = self.g.run_text("compute", "tpus", "tpu-vm", "ssh", "tester@sh-node", *zone, "--worker=all", strict,
                                  "--command=echo $(hostname) $(cat ~/payload-copy.txt)")
            copies = sorted(out.strip().splitlines())
            expect(len(copies) == 2 and all(c.endswith(" copied by gcloud scp") for c in copies)
                   and copies[0].split()[0][-1] == "0" and copies[1].split()[0][-1] == "1",
                   f"after tpu-vm scp --worker=all each worker should hold the file: {out!r}")

            # The alpha command reads the queued resource and its node through v2alpha1; as another user it adds
            # that user's key to the node through v2alpha1's nodes.patch.
            out = self.g.run_text("alpha", "compute", "tpus", "queued-resources", "ssh", "alpha@gcloud-sh", *zone,
                                  "--worker=all", "--node=all", strict, "--command=echo $(hostname) $USER")
            names = sorted(out.strip().splitlines())
            expect(len(names) == 2 and all(re.fullmatch(r"t1v-n-[0-9a-f]{8}-w-[01] alpha", n) for n in names)
                   and names[0][-7] == "0" and names[1][-7] == "1" and names[0][:-8] == names[1][:-8],
                   f"alpha queued-resources ssh --node=all --worker=all: both hosts as alpha, printed {out!r}")
            with open(known_hosts, encoding="utf-8") as f:
                expect(f.read() == trusted, "ssh added host keys of its own: some host showed a key its guest "
                                            "attributes do not publish")
        finally:
            self.g.run(*qr, "delete", "gcloud-sh", *zone, "--force", "--quiet")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gcloud", default="/usr/bin/gcloud")
    args = parser.parse_args()
    root_url = os.environ["JOBMAN_TPU_ROOT_URL"]
    if not root_url.startswith("http://127.0.0.1:"):
        raise SystemExit(f"refusing to point gcloud at {root_url}: only 127.0.0.1 is allowed")
    project = os.environ["JOBMAN_TPU_PROJECT"]
    with tempfile.TemporaryDirectory(prefix="jobman-gcloud-") as scratch:
        gcloud = Gcloud(args.gcloud, scratch, root_url, project)
        flow = Flow(gcloud, project, os.environ["JOBMAN_TPU_ZONE"], os.environ["JOBMAN_SA_KEY_FILE"])
        started = time.monotonic()
        flow.part("login", flow.login)
        if flow.failures:
            return 1  # Nothing else can work without a token.
        flow.part("the zone's offer", flow.offer)
        flow.part("nodes", flow.nodes)
        flow.part("queued resources", flow.queued_resources)
        flow.part("provisioning models (gcloud alpha)", flow.provisioning_models)
        flow.part("project metadata", flow.project_metadata)
        flow.part("OS Login", flow.os_login)
        flow.part("ssh and scp", flow.ssh_and_scp)
        print(f"{gcloud.calls} gcloud calls in {time.monotonic() - started:.1f} s; "
              f"{len(flow.failures)} parts failed: {flow.failures}")
        return 1 if flow.failures else 0


if __name__ == "__main__":
    sys.exit(main())
