"""Checks HTTP responses of the mock cloud against the TPU v2 discovery document, strictly.

Every /v2 exchange is matched to the discovery method whose flatPath and HTTP method fit it, and its body is walked
against that method's response schema: JSON types, enum strings, the string formats of Google's JSON mapping
(int64 as a decimal string, google-datetime, google-duration), and no field that the schema does not name. An
Operation's `metadata` and `response` are google.protobuf.Any: their `@type` names the message, and the rest of the
object is checked against that message's schema. Error bodies must be google.rpc Status bodies.

Used as a module by tests/clients/run_client.py, and from the command line on a file of recorded exchanges:
    discovery_schema.py DISCOVERY.json EXCHANGES.jsonl
"""

import json
import re
import sys
import urllib.parse

# type.googleapis.com/<full message name> for the messages an Operation of the TPU API carries.
ANY_PREFIX = "type.googleapis.com/"
ANY_MESSAGES = {
    "google.cloud.tpu.v2.OperationMetadata": "OperationMetadata",
    "google.cloud.tpu.v2.QueuedResource": "QueuedResource",
    "google.cloud.tpu.v2.Node": "Node",
    "google.protobuf.Empty": "Empty",
}

# RFC 3339 with 'Z' or an offset and 0, 3, 6 or 9 fractional digits, as Google's JSON mapping writes Timestamps.
DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3}|\.\d{6}|\.\d{9})?(Z|[+-]\d{2}:\d{2})$")
# A Duration: seconds with 0, 3, 6 or 9 fractional digits and the suffix "s".
DURATION = re.compile(r"^-?\d+(\.\d{3}|\.\d{6}|\.\d{9})?s$")
INT64 = re.compile(r"^-?(0|[1-9]\d*)$")
UINT64 = re.compile(r"^(0|[1-9]\d*)$")
BYTES = re.compile(r"^[A-Za-z0-9+/_-]*={0,2}$")
# `$alt=json;enum-encoding=int` (or `alt=`), the system parameter that asks for enums as numbers.
ENUM_NUMBERS = re.compile(r"[?&]\$?alt=[^&]*;enum-encoding=int(;|&|$)")
INTEGER_RANGES = {"int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1)}


class Discovery:
    """The schemas and methods of one discovery document."""

    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            self.document = json.load(f)
        self.schemas = self.document["schemas"]
        self.methods = []
        self.enum_numbers = False
        self._collect(self.document)

    def _collect(self, resource):
        for method in resource.get("methods", {}).values():
            # "v2/projects/{projectsId}/locations/{locationsId}/nodes/{nodesId}:start" -> a regex of one segment each.
            pattern = re.sub(r"\\{[A-Za-z]+\\}", "[^/:]+", re.escape(method["flatPath"]))
            self.methods.append((method["httpMethod"], re.compile("^/" + pattern + "$"), method))
        for child in resource.get("resources", {}).values():
            self._collect(child)

    def method_for(self, http_method, path):
        """The discovery method that serves `http_method` on `path` (no query string), or None."""
        for verb, pattern, method in self.methods:
            if verb == http_method and pattern.match(path):
                return method
        return None

    def validate(self, schema_name, value, enum_numbers=False, where=None):
        """The list of deviations of `value` from the schema `schema_name`; empty when it conforms. With
        `enum_numbers` (the request asked for `$alt=json;enum-encoding=int`) enums must be numbers instead of
        strings: the discovery document does not give them, so any int32 at least 0 passes."""
        errors = []
        self.enum_numbers = enum_numbers
        self._check(self.schemas[schema_name], value, where or schema_name, errors)
        return errors

    def _check(self, schema, value, where, errors):
        if "$ref" in schema:
            schema = self.schemas[schema["$ref"]]
        kind = schema.get("type")
        if kind == "any":
            return
        if kind == "object":
            self._check_object(schema, value, where, errors)
        elif kind == "array":
            if not isinstance(value, list):
                errors.append(f"{where}: expected an array, got {json.dumps(value)[:80]}")
                return
            for i, item in enumerate(value):
                self._check(schema["items"], item, f"{where}[{i}]", errors)
        elif kind == "string" and "enum" in schema and self.enum_numbers:
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**31:
                errors.append(f"{where}: expected an enum number (enum-encoding=int), got {json.dumps(value)[:80]}")
        elif kind == "string":
            self._check_string(schema, value, where, errors)
        elif kind == "integer":
            if not isinstance(value, int) or isinstance(value, bool):
                errors.append(f"{where}: expected an integer, got {json.dumps(value)[:80]}")
                return
            low, high = INTEGER_RANGES.get(schema.get("format"), (None, None))
            if low is not None and not low <= value <= high:
                errors.append(f"{where}: {value} is out of {schema['format']} range")
        elif kind == "number":
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                errors.append(f"{where}: expected a number, got {json.dumps(value)[:80]}")
        elif kind == "boolean":
            if not isinstance(value, bool):
                errors.append(f"{where}: expected a boolean, got {json.dumps(value)[:80]}")
        else:
            errors.append(f"{where}: the schema has an unknown type {kind!r}")

    def _check_object(self, schema, value, where, errors):
        if not isinstance(value, dict):
            errors.append(f"{where}: expected an object, got {json.dumps(value)[:80]}")
            return
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        if additional is not None and properties is None:
            # A map, or a google.protobuf.Any (values "any", with "@type" naming the message).
            if "@type" in value and additional.get("type") == "any":
                self._check_any(value, where, errors)
                return
            for key, item in value.items():
                self._check(additional, item, f"{where}[{key!r}]", errors)
            return
        for key, item in value.items():
            if key not in (properties or {}):
                errors.append(f"{where}: unknown field {key!r}")
                continue
            self._check(properties[key], item, f"{where}.{key}", errors)

    def _check_any(self, value, where, errors):
        type_url = value["@type"]
        name = type_url[len(ANY_PREFIX):] if isinstance(type_url, str) and type_url.startswith(ANY_PREFIX) else None
        if name not in ANY_MESSAGES:
            errors.append(f"{where}.@type: {type_url!r} is not a message the TPU API puts in an Any")
            return
        rest = {k: v for k, v in value.items() if k != "@type"}
        self._check(self.schemas[ANY_MESSAGES[name]], rest, f"{where}<{name}>", errors)

    def _check_string(self, schema, value, where, errors):
        if not isinstance(value, str):
            errors.append(f"{where}: expected a string, got {json.dumps(value)[:80]}")
            return
        if "enum" in schema and value not in schema["enum"]:
            errors.append(f"{where}: {value!r} is not one of {schema['enum']}")
        fmt = schema.get("format")
        checks = {
            "google-datetime": DATETIME,
            "google-duration": DURATION,
            "int64": INT64,
            "uint64": UINT64,
            "byte": BYTES,
        }
        if fmt in checks and not checks[fmt].match(value):
            errors.append(f"{where}: {value!r} is not a {fmt} string")


def validate_error_body(body, where):
    """Deviations of an error response from the google.rpc Status body Google sends: {"error": {code, message,
    status[, details]}}."""
    errors = []
    if not isinstance(body, dict) or set(body) != {"error"} or not isinstance(body["error"], dict):
        return [f"{where}: an error body must be {{\"error\": {{...}}}}, got {json.dumps(body)[:120]}"]
    error = body["error"]
    unknown = set(error) - {"code", "message", "status", "details"}
    if unknown:
        errors.append(f"{where}: unknown fields {sorted(unknown)} in the error")
    if not isinstance(error.get("code"), int) or isinstance(error.get("code"), bool):
        errors.append(f"{where}: error.code must be an integer")
    if not isinstance(error.get("message"), str):
        errors.append(f"{where}: error.message must be a string")
    if not isinstance(error.get("status"), str) or not re.match(r"^[A-Z_]+$", error.get("status", "")):
        errors.append(f"{where}: error.status must be a google.rpc.Code name")
    return errors


def validate_exchange(discovery, exchange):
    """Deviations of one recorded exchange ({"method", "path", "status", "body"}) from the discovery document, and
    the id of the discovery method it called (None for a path outside the API)."""
    where = f"{exchange['method']} {exchange['path']} -> {exchange['status']}"
    path = exchange["path"].split("?", 1)[0]
    method = discovery.method_for(exchange["method"], path)
    if method is None:
        return [f"{where}: no method of the discovery document serves this"], None
    try:
        body = json.loads(exchange["body"]) if exchange["body"] else None
    except ValueError:
        return [f"{where}: the body is not JSON: {exchange['body'][:120]!r}"], method["id"]
    if not 200 <= exchange["status"] < 300:
        return validate_error_body(body, where), method["id"]
    response = method.get("response", {}).get("$ref")
    if response is None:
        return ([] if body in (None, {}) else [f"{where}: the method returns nothing, got a body"]), method["id"]
    enum_numbers = bool(ENUM_NUMBERS.search(urllib.parse.unquote(exchange["path"])))
    return discovery.validate(response, body, enum_numbers, f"{where}: {response}"), method["id"]


def main(argv):
    if len(argv) != 3:
        print("usage: discovery_schema.py DISCOVERY.json EXCHANGES.jsonl", file=sys.stderr)
        return 2
    discovery = Discovery(argv[1])
    failures = 0
    with open(argv[2], encoding="utf-8") as f:
        for line in f:
            errors, _ = validate_exchange(discovery, json.loads(line))
            for error in errors:
                print(error)
            failures += len(errors)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
