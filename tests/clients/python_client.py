#!/usr/bin/python3
"""Google's Python API client (googleapiclient, from the TPU v2 discovery document) and google-auth with a
service-account key, against the mock cloud. Run by run_client.py, which sets the JOBMAN_* variables.

    python_client.py DISCOVERY.json
"""

import json
import os
import sys
import time

from google.oauth2 import service_account
from googleapiclient import discovery
from googleapiclient.errors import HttpError

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
DEADLINE_S = 120


def wait_for(what, probe):
    """Calls probe() until it returns a true value, or fails after DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def expect(condition, message):
    if not condition:
        raise SystemExit(f"FAILED: {message}")


def not_found(call):
    """True when the request answers 404."""
    try:
        call.execute()
    except HttpError as e:
        return e.resp.status == 404
    return False


class Flow:
    def __init__(self, tpu, project, zone):
        self.tpu = tpu
        self.locations = tpu.projects().locations()
        self.parent = f"projects/{project}/locations/{zone}"

    def wait_operation(self, operation):
        """Polls operations.get until the operation is done; returns it, which must not carry an error."""
        done = wait_for(f"operation {operation['name']}",
                        lambda: (lambda op: op if op.get("done") else None)(
                            self.locations.operations().get(name=operation["name"]).execute()))
        expect("error" not in done, f"operation {done['name']} failed: {done.get('error')}")
        return done

    def catalog(self):
        accelerators = self.locations.acceleratorTypes().list(parent=self.parent).execute()
        names = [a["name"] for a in accelerators.get("acceleratorTypes", [])]
        expect(f"{self.parent}/acceleratorTypes/v4-8" in names, f"v4-8 is not among the accelerator types {names}")
        v4_8 = self.locations.acceleratorTypes().get(name=f"{self.parent}/acceleratorTypes/v4-8").execute()
        expect(v4_8.get("type") == "v4-8", f"acceleratorTypes.get answered {v4_8}")

        runtimes = self.locations.runtimeVersions().list(parent=self.parent).execute()
        versions = [r["version"] for r in runtimes.get("runtimeVersions", [])]
        expect(versions, "no runtime versions")
        runtime = self.locations.runtimeVersions().get(
            name=f"{self.parent}/runtimeVersions/{versions[0]}").execute()
        expect(runtime.get("version") == versions[0], f"runtimeVersions.get answered {runtime}")

    def queued_resource(self, qr_id, node_id):
        qrs = self.locations.queuedResources()
        body = {
            "tpu": {"nodeSpec": [{
                "parent": self.parent,
                "nodeId": node_id,
                "node": {"acceleratorType": "v4-8", "runtimeVersion": "tpu-ubuntu2204-base",
                         "labels": {"client": "googleapiclient"}},
            }]},
            "spot": {},
        }
        operation = qrs.create(parent=self.parent, queuedResourceId=qr_id, body=body).execute()
        done = self.wait_operation(operation)
        name = f"{self.parent}/queuedResources/{qr_id}"
        expect(done["response"].get("name") == name, f"create's operation answered {done['response']}")

        wait_for(f"{qr_id} ACTIVE", lambda: qrs.get(name=name).execute()["state"]["state"] == "ACTIVE")
        listed = qrs.list(parent=self.parent).execute()
        expect(name in [q["name"] for q in listed.get("queuedResources", [])], f"{name} is not listed")
        got = qrs.get(name=name).execute()
        expect(got["tpu"]["nodeSpec"][0]["nodeId"] == node_id and "spot" in got, f"get answered {got}")

        node_name = f"{self.parent}/nodes/{node_id}"
        node = self.locations.nodes().get(name=node_name).execute()
        expect(node["state"] == "READY" and node["acceleratorType"] == "v4-8", f"nodes.get answered {node}")
        nodes = self.locations.nodes().list(parent=self.parent).execute()
        expect(node_name in [n["name"] for n in nodes.get("nodes", [])], f"{node_name} is not listed")

        self.wait_operation(qrs.delete(name=name, force=True).execute())
        wait_for(f"{qr_id} gone", lambda: not_found(qrs.get(name=name)))

    def node(self, node_id):
        nodes = self.locations.nodes()
        body = {"acceleratorType": "v4-8", "runtimeVersion": "tpu-ubuntu2204-base",
                "schedulingConfig": {"spot": True}}
        self.wait_operation(nodes.create(parent=self.parent, nodeId=node_id, body=body).execute())
        name = f"{self.parent}/nodes/{node_id}"
        wait_for(f"{node_id} READY", lambda: nodes.get(name=name).execute()["state"] == "READY")
        listed = nodes.list(parent=self.parent).execute()
        expect(name in [n["name"] for n in listed.get("nodes", [])], f"{name} is not listed")
        self.wait_operation(nodes.delete(name=name).execute())
        wait_for(f"{node_id} gone", lambda: not_found(nodes.get(name=name)))


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        document = json.load(f)
    # The documented way to reach another endpoint with a discovery document: its root URL.
    document["rootUrl"] = os.environ["JOBMAN_TPU_ROOT_URL"]
    document["baseUrl"] = os.environ["JOBMAN_TPU_ROOT_URL"] + document["servicePath"]
    credentials = service_account.Credentials.from_service_account_file(os.environ["JOBMAN_SA_KEY_FILE"],
                                                                        scopes=SCOPES)
    tpu = discovery.build_from_document(document, credentials=credentials)
    flow = Flow(tpu, os.environ["JOBMAN_TPU_PROJECT"], os.environ["JOBMAN_TPU_ZONE"])
    failures = []
    # Each part runs even when an earlier one failed, so that one run reports every method that is missing.
    for part, call in (("queued resources", lambda: flow.queued_resource("py-qr", "py-qr-node")),
                       ("catalog", flow.catalog),
                       ("nodes", lambda: flow.node("py-node"))):
        try:
            call()
            print(f"{part}: ok")
        except (Exception, SystemExit) as e:  # noqa: BLE001 (any failure of one part is reported, not fatal)
            print(f"{part}: FAILED: {e!r}")
            failures.append(part)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
