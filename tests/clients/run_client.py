#!/usr/bin/python3
"""Runs one of Google's client libraries against jobman-mock-cloud and checks every API response it got.

    run_client.py --mock BINARY --discovery JSON [--mock-config YAML] [--record FILE] [--expect METHOD]...
                  [--timeout SECONDS] -- CLIENT_COMMAND...

The mock starts on a free port with a scratch state directory, a fast clock and a service-account key whose
token_uri is the mock. The client reaches the TPU API through a recording proxy in this process and the token
endpoint and metadata server directly. It is told where everything is by environment variables:

    JOBMAN_TPU_ROOT_URL      the API's root URL (the proxy), "http://127.0.0.1:PORT/"
    JOBMAN_TPU_PROJECT       the project (the one the metadata server and the key file name)
    JOBMAN_TPU_ZONE          a zone of the mock's default world
    JOBMAN_SA_KEY_FILE       the service-account key file
    GCE_METADATA_HOST        the metadata server, "127.0.0.1:PORT" (as google-auth-library reads it)
    JOBMAN_MOCK_GCS_ROOT     the mock's bucket root: a directory per bucket, whose files are its objects (a client
                             test of the Cloud Storage API makes its buckets and objects there)

The test fails when the client fails, when a response deviates from the discovery document (discovery_schema.py),
or when a method of EXPECTED_METHODS (or of the --expect options) was not answered with success at least once. The
Cloud Storage JSON API's exchanges (/storage/v1/...) have no discovery document here: they are named by STORAGE_METHODS
(so that --expect can name them) and their errors checked for Google's error body.
"""

import argparse
import http.client
import http.server
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # Nothing written into the source tree.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import discovery_schema  # noqa: E402

PROJECT = "jobman-mock"
# What every client must have called with success: the queued-resource and node lifecycles and the catalog.
EXPECTED_METHODS = [
    "tpu.projects.locations.queuedResources.create",
    "tpu.projects.locations.queuedResources.get",
    "tpu.projects.locations.queuedResources.list",
    "tpu.projects.locations.queuedResources.delete",
    "tpu.projects.locations.operations.get",
    "tpu.projects.locations.nodes.create",
    "tpu.projects.locations.nodes.get",
    "tpu.projects.locations.nodes.list",
    "tpu.projects.locations.nodes.delete",
    "tpu.projects.locations.acceleratorTypes.list",
    "tpu.projects.locations.acceleratorTypes.get",
    "tpu.projects.locations.runtimeVersions.list",
    "tpu.projects.locations.runtimeVersions.get",
]
# The Cloud Storage JSON API's methods the mock serves, by HTTP method and path.
STORAGE_METHODS = [
    ("GET", re.compile(r"^/storage/v1/b/[^/]+$"), "storage.buckets.get"),
    ("GET", re.compile(r"^/storage/v1/b/[^/]+/o$"), "storage.objects.list"),
    ("GET", re.compile(r"^/storage/v1/b/[^/]+/o/.+$"), "storage.objects.get"),
]
ZONE = "us-central2-b"
# Hop-by-hop headers (RFC 9110 section 7.6.1) and the framing the proxy redoes itself.
HOP_HEADERS = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
               "content-length"}


class RecordingProxy(http.server.ThreadingHTTPServer):
    """Forwards every request to the mock unchanged and records the exchange."""

    daemon_threads = True

    def __init__(self, upstream_port):
        super().__init__(("127.0.0.1", 0), ProxyHandler)
        self.upstream_port = upstream_port
        self.exchanges = []
        self.lock = threading.Lock()


class ProxyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass

    def _forward(self):
        length = int(self.headers.get("Content-Length", "0") or "0")
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS and k.lower() != "host"}
        if body is not None or self.command in ("POST", "PUT", "PATCH"):
            headers["Content-Length"] = str(len(body or b""))
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.upstream_port, timeout=60)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            payload = response.read()
            response_headers = response.getheaders()
            status = response.status
        finally:
            upstream.close()
        with self.server.lock:
            self.server.exchanges.append({
                "method": self.command,
                "path": self.path,
                "status": status,
                "body": payload.decode("utf-8", "replace"),
            })
        self.send_response(status)
        for name, value in response_headers:
            if name.lower() not in HOP_HEADERS:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_DELETE = do_PATCH = do_PUT = _forward


def start_mock(binary, state_dir, key_file, config=None):
    mock = subprocess.Popen(
        [binary, "--port", "0", "--state-dir", state_dir, "--time-scale", "1000", "--seed", "7",
         "--write-service-account-key", key_file, *(["--config", config] if config else [])],
        stdout=subprocess.PIPE, text=True)
    first = mock.stdout.readline().strip()
    prefix = "listening on http://127.0.0.1:"
    if not first.startswith(prefix):
        mock.kill()
        raise SystemExit(f"the mock did not start: {first!r}")
    return mock, int(first[len(prefix):])


def storage_method(exchange):
    """The Cloud Storage method an exchange called, or None when it is not one the mock serves."""
    path = exchange["path"].split("?", 1)[0]
    for http_method, pattern, method_id in STORAGE_METHODS:
        if exchange["method"] == http_method and pattern.match(path):
            return method_id
    return None


def check_storage(exchange):
    """Deviations of one Cloud Storage exchange, and the method it called: an unknown route, or an error body that is
    not Google's (the google.rpc Status that Cloud Storage's JSON API extends with `errors`)."""
    where = f"{exchange['method']} {exchange['path']} ({exchange['status']})"
    method_id = storage_method(exchange)
    if method_id is None:
        return [f"{where}: not a Cloud Storage method the mock serves"], None
    if 200 <= exchange["status"] < 300:
        return [], method_id
    try:
        body = json.loads(exchange["body"])
    except ValueError:
        return [f"{where}: the error body is not JSON"], method_id
    reasons = body.get("error", {}).pop("errors", None) if isinstance(body, dict) else None
    errors = discovery_schema.validate_error_body(body, where)
    if not isinstance(reasons, list) or not all(
            isinstance(r, dict) and set(r) >= {"message", "domain", "reason"} for r in reasons):
        errors.append(f"{where}: error.errors must list {{message, domain, reason}}")
    return errors, method_id


def check(exchanges, discovery, expected):
    """Prints every deviation and every expected method not answered with success; True when there is none. The TPU
    API's exchanges (/v2/...) are checked against its discovery document and Cloud Storage's (/storage/v1/...) as
    check_storage does; a client may call other APIs of the mock too (gcloud calls the Compute API), which are not
    checked."""
    failures = []
    succeeded = set()
    tpu = [e for e in exchanges if e["path"].startswith("/v2/")]
    storage = [e for e in exchanges if e["path"].startswith("/storage/v1/")]
    for exchange in tpu:
        errors, method_id = discovery_schema.validate_exchange(discovery, exchange)
        failures.extend(errors)
        if method_id and 200 <= exchange["status"] < 300:
            succeeded.add(method_id)
    for exchange in storage:
        errors, method_id = check_storage(exchange)
        failures.extend(errors)
        if method_id and 200 <= exchange["status"] < 300:
            succeeded.add(method_id)
    for method_id in expected:
        if method_id not in succeeded:
            failures.append(f"{method_id}: the client never got a successful response from it")
    for failure in failures:
        print(f"DEVIATION {failure}")
    print(f"{len(tpu)} API responses checked against the discovery document, {len(storage)} Cloud Storage responses "
          f"checked, {len(failures)} deviations")
    return not failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mock", required=True)
    parser.add_argument("--discovery", required=True)
    parser.add_argument("--record", help="also write the exchanges to this JSON-lines file")
    parser.add_argument("--mock-config", help="the mock's world config (default: its own, configs/mock-cloud.yaml)")
    parser.add_argument("--expect", action="append", metavar="METHOD",
                        help="a discovery method id (or a Cloud Storage one of STORAGE_METHODS) the client must call "
                             "with success (repeated; default: the queued-resource and node lifecycles and the "
                             "catalog)")
    parser.add_argument("--timeout", type=float, default=240,
                        help="seconds the client may run (default 240); keep it under the CTest timeout, so that the "
                             "mock is always stopped here")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    discovery = discovery_schema.Discovery(args.discovery)

    with tempfile.TemporaryDirectory(prefix="jobman-clients-") as scratch:
        key_file = os.path.join(scratch, "key.json")
        home = os.path.join(scratch, "home")
        os.mkdir(home)
        mock, mock_port = start_mock(args.mock, os.path.join(scratch, "state"), key_file, args.mock_config)
        proxy = RecordingProxy(mock_port)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("GOOGLE_", "GCLOUD_", "GCE_", "CLOUDSDK_")) and k not in ("HTTP_PROXY",
                                                                                             "HTTPS_PROXY")}
        env.update({
            # A HOME of its own, so that no gcloud or application-default credentials of the machine are found.
            "HOME": home,
            "NO_PROXY": "127.0.0.1,localhost",
            "JOBMAN_TPU_ROOT_URL": f"http://127.0.0.1:{proxy.server_address[1]}/",
            "JOBMAN_TPU_PROJECT": PROJECT,
            "JOBMAN_TPU_ZONE": ZONE,
            "JOBMAN_SA_KEY_FILE": key_file,
            "GCE_METADATA_HOST": f"127.0.0.1:{mock_port}",
            "JOBMAN_MOCK_GCS_ROOT": os.path.join(scratch, "state", "buckets"),
        })
        started = time.monotonic()
        try:
            client = subprocess.run(command, env=env, timeout=args.timeout)
        finally:
            proxy.shutdown()
            mock.terminate()
            mock.wait(timeout=60)
        print(f"client exited {client.returncode} after {time.monotonic() - started:.1f} s")
        if args.record:
            with open(args.record, "w", encoding="utf-8") as f:
                for exchange in proxy.exchanges:
                    f.write(json.dumps(exchange) + "\n")
        ok = check(proxy.exchanges, discovery, args.expect or EXPECTED_METHODS)
        return 0 if ok and client.returncode == 0 and mock.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
