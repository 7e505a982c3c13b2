#!/usr/bin/python3
"""The validator of tests/clients refuses every kind of deviation from the discovery document it claims to catch."""

import json
import os
import sys
import unittest

sys.dont_write_bytecode = True  # Nothing written into the source tree.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import discovery_schema  # noqa: E402

DISCOVERY = discovery_schema.Discovery(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                    "tpu-v2-discovery.json"))
PARENT = "projects/p/locations/us-central2-b"


def queued_resource(**changes):
    resource = {
        "name": f"{PARENT}/queuedResources/qr",
        "createTime": "2026-11-25T07:00:00.123456789Z",
        "tpu": {"nodeSpec": [{"parent": PARENT, "nodeId": "n",
                              "node": {"acceleratorType": "v4-8", "runtimeVersion": "tpu-ubuntu2204-base"}}]},
        "spot": {},
        "queueingPolicy": {"validUntilDuration": "3600s"},
        "state": {"state": "ACTIVE", "stateInitiator": "USER", "activeData": {}},
    }
    resource.update(changes)
    return resource


def exchange(method, path, body, status=200):
    return {"method": method, "path": path, "status": status, "body": json.dumps(body)}


class ValidatorTest(unittest.TestCase):
    def errors(self, schema, value):
        return DISCOVERY.validate(schema, value)

    def test_a_conforming_resource_passes(self):
        self.assertEqual(self.errors("QueuedResource", queued_resource()), [])

    def test_unknown_fields_are_refused_at_any_depth(self):
        self.assertIn("unknown field 'colour'", self.errors("QueuedResource", queued_resource(colour="red"))[0])
        nested = queued_resource(state={"state": "ACTIVE", "activeData": {"since": "now"}})
        self.assertIn("unknown field 'since'", self.errors("QueuedResource", nested)[0])

    def test_enum_strings_must_be_the_documents(self):
        self.assertIn("is not one of", self.errors("QueuedResource", queued_resource(state={"state": "RUNNING"}))[0])
        self.assertIn("expected a string", self.errors("QueuedResourceState", {"state": 6})[0])

    def test_formats(self):
        self.assertTrue(self.errors("QueuedResource", queued_resource(createTime="2026-11-25 07:00:00")))
        self.assertTrue(self.errors("QueuedResource", queued_resource(createTime="2026-11-25T07:00:00.1234Z")))
        self.assertTrue(self.errors("QueueingPolicy", {"validUntilDuration": "1h"}))
        self.assertTrue(self.errors("QueueingPolicy", {"validUntilDuration": 3600}))
        self.assertEqual(self.errors("QueueingPolicy", {"validUntilDuration": "1.500s"}), [])
        self.assertTrue(self.errors("Node", {"id": 123}))  # int64 travels as a string.
        self.assertTrue(self.errors("Node", {"id": "12x"}))
        self.assertEqual(self.errors("Node", {"id": "123"}), [])
        self.assertTrue(self.errors("Node", {"labels": {"a": 1}}))
        self.assertTrue(self.errors("Node", {"networkEndpoints": {"ipAddress": "10.0.0.1"}}))
        self.assertTrue(self.errors("Node", {"networkEndpoints": [{"port": "8470"}]}))  # int32 is a number.
        self.assertTrue(self.errors("Node", {"multisliceNode": "true"}))

    def test_an_operation_s_any_fields_are_checked_against_the_message_they_name(self):
        operation = {
            "name": f"{PARENT}/operations/op",
            "metadata": {"@type": "type.googleapis.com/google.cloud.tpu.v2.OperationMetadata",
                         "createTime": "2026-11-25T07:00:00Z", "verb": "create", "apiVersion": "v2"},
            "done": True,
            "response": dict(queued_resource(), **{"@type": "type.googleapis.com/google.cloud.tpu.v2.QueuedResource"}),
        }
        self.assertEqual(self.errors("Operation", operation), [])
        operation["response"]["state"] = {"state": "UP"}
        self.assertTrue(self.errors("Operation", operation))
        operation["response"] = {"@type": "type.googleapis.com/google.cloud.tpu.v2.Elsewhere"}
        self.assertIn("is not a message", self.errors("Operation", operation)[0])
        operation["response"] = {"@type": "type.googleapis.com/google.protobuf.Empty", "x": 1}
        self.assertIn("unknown field 'x'", self.errors("Operation", operation)[0])

    def test_exchanges_are_matched_to_their_method_and_error_bodies_checked(self):
        path = f"/v2/{PARENT}/queuedResources/qr"
        errors, method = discovery_schema.validate_exchange(DISCOVERY, exchange("GET", path, queued_resource()))
        self.assertEqual((errors, method), ([], "tpu.projects.locations.queuedResources.get"))
        errors, method = discovery_schema.validate_exchange(
            DISCOVERY, exchange("GET", f"/v2/{PARENT}/queuedResources?pageSize=5", {"queuedResources": [{"x": 1}]}))
        self.assertEqual(method, "tpu.projects.locations.queuedResources.list")
        self.assertTrue(errors)
        not_found = {"error": {"code": 404, "message": "no such thing", "status": "NOT_FOUND"}}
        self.assertEqual(discovery_schema.validate_exchange(DISCOVERY, exchange("GET", path, not_found, 404))[0], [])
        self.assertTrue(discovery_schema.validate_exchange(DISCOVERY, exchange("GET", path, {"message": "no"}, 404))[0])
        # With enum-encoding=int, enums must be numbers, and only there.
        numbers = dict(queued_resource(), state={"state": 6, "stateInitiator": 1})
        encoded = f"{path}?$alt=json%3Benum-encoding=int"
        self.assertEqual(discovery_schema.validate_exchange(DISCOVERY, exchange("GET", encoded, numbers))[0], [])
        self.assertTrue(discovery_schema.validate_exchange(DISCOVERY, exchange("GET", encoded, queued_resource()))[0])
        self.assertTrue(discovery_schema.validate_exchange(DISCOVERY, exchange("GET", path, numbers))[0])
        errors, method = discovery_schema.validate_exchange(DISCOVERY, exchange("GET", "/v2/elsewhere", {}))
        self.assertIsNone(method)
        self.assertTrue(errors)


if __name__ == "__main__":
    unittest.main()
