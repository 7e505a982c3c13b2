#!/usr/bin/env python3
"""Runs clang-tidy over translation units, skipping those it already passed with the same input.

Usage: tidy-cached.py BUILD_DIR UNIT... [-- CLANG_TIDY_ARGS...]
A unit's key is a digest of what clang-tidy reads: the unit preprocessed with its own compile command (every header
it includes, with this checkout's path written as a placeholder so that another clone of the same commit has the
same key), that compile command, .clang-tidy, the arguments and clang-tidy's version. A unit that passes leaves its
key in the cache (JOBMAN_TIDY_CACHE, default ~/.cache/jobman/clang-tidy); a unit whose key is there is not checked
again. A unit that cannot be preprocessed is checked anyway. Units run one per core (JOBMAN_TIDY_JOBS).
Prints clang-tidy's findings and exits 1 if any unit has one; the last line says how many units were checked.
"""
import concurrent.futures
import hashlib
import json
import os
import shlex
import subprocess
import sys
import time

KEEP_DAYS = 30  # A key nobody has used for this long is removed.


def compile_commands(build_dir):
    by_file = {}
    for entry in json.load(open(os.path.join(build_dir, "compile_commands.json"))):
        path = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
        args = entry.get("arguments") or shlex.split(entry["command"])
        by_file[path] = (entry["directory"], args)
    return by_file


def preprocess_args(args):
    """The compile command turned into one that writes the preprocessed unit to stdout."""
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg == "-o":
            skip = True
            continue
        if arg == "-c" or arg.startswith("-o"):
            continue
        out.append(arg)
    return out + ["-E", "-o", "-"]


def unit_key(root, common, directory, args):
    digest = hashlib.sha256(common)
    digest.update(" ".join(args).replace(root, "@ROOT@").encode())
    run = subprocess.run(preprocess_args(args), cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if run.returncode != 0:
        return None
    digest.update(run.stdout.replace(root.encode(), b"@ROOT@"))
    return digest.hexdigest()


def main():
    argv = sys.argv[1:]
    tidy_args = []
    if "--" in argv:
        tidy_args = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    build_dir, units = argv[0], argv[1:]
    root = os.getcwd()
    cache = os.environ.get("JOBMAN_TIDY_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "jobman", "clang-tidy")
    os.makedirs(cache, exist_ok=True)
    version = subprocess.run(["clang-tidy", "--version"], stdout=subprocess.PIPE, check=True).stdout
    common = version + open(os.path.join(root, ".clang-tidy"), "rb").read() + " ".join(tidy_args).encode()
    commands = compile_commands(build_dir)
    jobs = int(os.environ.get("JOBMAN_TIDY_JOBS") or os.cpu_count() or 1)

    def check(unit):
        path = os.path.realpath(unit)
        directory, args = commands.get(path, (root, None))
        key = unit_key(root, common, directory, args) if args else None
        marker = os.path.join(cache, key) if key else None
        if marker and os.path.exists(marker):
            os.utime(marker)
            return unit, True, ""
        # The build's compiler is GCC: its own options (-Wno-restrict, --param) are not clang's, and not findings.
        run = subprocess.run(["clang-tidy", "-p", build_dir, "--quiet", "--warnings-as-errors=*",
                              "--extra-arg=-Wno-unknown-warning-option",
                              "--extra-arg=-Wno-unused-command-line-argument", *tidy_args, unit],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if run.returncode == 0 and marker:
            open(marker, "w").close()
        return unit, False, run.stdout if run.returncode != 0 else ""

    failed, checked = [], 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for unit, cached, findings in pool.map(check, units):
            checked += 0 if cached else 1
            if findings:
                failed.append(unit)
                sys.stdout.write(findings)
    stale = time.time() - KEEP_DAYS * 86400
    for name in os.listdir(cache):
        marker = os.path.join(cache, name)
        if os.path.getmtime(marker) < stale:
            os.remove(marker)
    print(f"clang-tidy: {checked} of {len(units)} units checked, {len(units) - checked} unchanged since they passed"
          + (f"; findings in {len(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
