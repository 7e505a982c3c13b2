#!/usr/bin/env python3
"""Prints the translation units of a unity build that cover the given sources, each source once.

Usage: unity-units.py COMPILE_COMMANDS_JSON SOURCE...
A unit is a unity batch (CMake's Unity/unity_N_cxx.cxx, which #includes its sources) or a source compiled on its own.
A source in several batches (the layers' link checks share one) is covered by the first; a source in none is printed
as itself. Exits 1 if a source has no compile command at all.
"""
import json
import os
import re
import sys


def main() -> int:
    database, sources = sys.argv[1], sys.argv[2:]
    root = os.getcwd()
    wanted = {os.path.realpath(os.path.join(root, s)) for s in sources}
    include = re.compile(r'^#include "(.+)"\s*$')
    covered, units = set(), []
    for entry in json.load(open(database)):
        path = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
        if "/Unity/unity_" in path:
            with open(path) as unit:
                inside = {os.path.realpath(m.group(1)) for m in map(include.match, unit) if m}
        else:
            inside = {path}
        fresh = (inside & wanted) - covered
        if fresh:
            covered |= fresh
            units.append(path)
    missing = sorted(wanted - covered)
    for path in missing:
        print(f"unity-units: no compile command for {os.path.relpath(path, root)}", file=sys.stderr)
    print("\n".join(units))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
