"""The mock cloud's pip, in the venvs its python3.N makes on a worker host.

A worker host has no package index to reach, so `pip install` records each requirement as an installed
distribution (its dist-info: name, version, installer) without its code, as the mock's conda records an
environment's dependencies without installing them. `pip show`, `list` and `freeze` read those records back. The
version is the one a requirement pins (==, ===, ~= or >=), else 0.0.0. A requirement whose name contains
"does-not-exist" fails as pip fails for a package the index lacks, and nothing is installed. Only names can be
installed: URLs, paths and editable installs fail. Other commands exit 1, as pip does for an unknown command.
"""

import importlib.metadata
import os
import re
import shutil
import sys
import sysconfig

VERSION = "24.0"
SITE = sysconfig.get_paths()["purelib"]
REQUIREMENT = re.compile(r"^([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(\[[^\]]*\])?\s*([^;]*?)\s*(;.*)?$")
PIN = re.compile(r"(===|==|~=|>=)\s*([A-Za-z0-9.+!*_-]+)")


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def fail(message, status=1):
    print("ERROR: " + message, file=sys.stderr)
    sys.exit(status)


def parse_requirement(text, origin):
    """(name, version) of one requirement line."""
    if "://" in text or text.startswith((".", "/", "-e", "--editable")):
        fail("%s: the mock cloud's pip installs packages by name only, not %s" % (origin, text))
    match = REQUIREMENT.match(text)
    if not match:
        fail("Invalid requirement: '%s' (from %s)" % (text, origin))
    pin = PIN.search(match.group(3) or "")
    version = pin.group(2).rstrip(".*") if pin else "0.0.0"
    return match.group(1), version


def read_requirements(path, seen):
    """The requirements of a -r file, following nested -r files."""
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        fail("Could not open requirements file: %s" % e)
    for number, line in enumerate(lines, 1):
        text = line.split(" #")[0].strip() if not line.lstrip().startswith("#") else ""
        if not text:
            continue
        origin = "%s (line %d)" % (path, number)
        if text.startswith(("-r ", "--requirement ")):
            nested = os.path.join(os.path.dirname(path), text.split(None, 1)[1])
            if nested not in seen:
                seen.add(nested)
                out.extend(read_requirements(nested, seen))
        elif text.startswith("-"):
            continue  # An option line (--index-url, -c, --pre, ...): there is no index to honour it.
        else:
            out.append(parse_requirement(text, origin))
    return out


def installed():
    """The distributions this interpreter sees, by normalized name."""
    out = {}
    for dist in importlib.metadata.distributions(path=[SITE]):
        name = dist.metadata["Name"]
        if name:
            out.setdefault(normalize(name), dist)
    return out


def record(name, version):
    """Writes the dist-info of a stand-in distribution, replacing any earlier one of the same name."""
    for entry in os.listdir(SITE):
        if entry.endswith(".dist-info") and normalize(entry[: -len(".dist-info")].rsplit("-", 1)[0]) == normalize(name):
            shutil.rmtree(os.path.join(SITE, entry))
    info = os.path.join(SITE, "%s-%s.dist-info" % (re.sub(r"[-.]+", "_", name), version))
    os.makedirs(info)
    files = {
        "METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
        "Summary: A stand-in from the mock cloud's pip: the package's metadata, not its code\n" % (name, version),
        "INSTALLER": "jobman-mock-pip\n",
    }
    for file, text in files.items():
        with open(os.path.join(info, file), "w", encoding="utf-8") as f:
            f.write(text)
    base = os.path.basename(info)
    with open(os.path.join(info, "RECORD"), "w", encoding="utf-8") as f:
        f.write("".join("%s/%s,,\n" % (base, file) for file in list(files) + ["RECORD"]))


def install(args):
    wanted = []
    i = 0
    takes_value = {"-c", "--constraint", "-i", "--index-url", "--extra-index-url", "-f", "--find-links", "-t",
                   "--target", "--prefix", "--root", "--cache-dir", "--timeout", "--retries", "--progress-bar"}
    while i < len(args):
        arg = args[i]
        if arg in ("-r", "--requirement"):
            if i + 1 >= len(args):
                fail("-r option requires 1 argument", 2)
            wanted.extend(read_requirements(args[i + 1], {args[i + 1]}))
            i += 2
            continue
        if arg.startswith("--requirement="):
            wanted.extend(read_requirements(arg.split("=", 1)[1], set()))
        elif arg in takes_value:
            i += 1
        elif not arg.startswith("-"):
            wanted.append(parse_requirement(arg, "the command line"))
        i += 1
    missing = [name for name, _ in wanted if "does-not-exist" in name.lower()]
    if missing:
        print("ERROR: Could not find a version that satisfies the requirement %s (from versions: none)" % missing[0],
              file=sys.stderr)
        fail("No matching distribution found for %s" % missing[0])
    done = []
    for name, version in wanted:
        if normalize(name) == "pip":
            print("Requirement already satisfied: pip in %s (%s)" % (SITE, VERSION))
            continue
        print("Collecting %s" % name)
        record(name, version)
        done.append("%s-%s" % (name, version))
    if done:
        print("Installing collected packages: " + ", ".join(d.rsplit("-", 1)[0] for d in done))
        print("Successfully installed " + " ".join(done))
    return 0


def show(args):
    names = [a for a in args if not a.startswith("-")]
    if not names:
        fail("Please provide a package name or names.")
    dists = installed()
    shown = []
    for name in names:
        dist = dists.get(normalize(name))
        if dist is None:
            continue
        meta = dist.metadata
        shown.append(
            "Name: %s\nVersion: %s\nSummary: %s\nHome-page: \nAuthor: \nAuthor-email: \nLicense: \nLocation: %s\n"
            "Requires: \nRequired-by: " % (meta["Name"], meta["Version"], meta["Summary"] or "", SITE))
    missing = [n for n in names if normalize(n) not in dists]
    if missing:
        print("WARNING: Package(s) not found: " + ", ".join(missing), file=sys.stderr)
    if shown:
        print("\n---\n".join(shown))
    return 0 if shown else 1


def listing(args, freeze):
    dists = sorted(installed().values(), key=lambda d: normalize(d.metadata["Name"]))
    rows = [(d.metadata["Name"], d.metadata["Version"]) for d in dists]
    if freeze:
        for name, version in rows:
            print("%s==%s" % (name, version))
        return 0
    rows = [("Package", "Version")] + rows
    width = max(len(name) for name, _ in rows)
    print("%s %s" % ("Package".ljust(width), "Version"))
    print("%s %s" % ("-" * width, "-" * max(len(v) for _, v in rows)))
    for name, version in rows[1:]:
        print("%s %s" % (name.ljust(width), version))
    return 0


def uninstall(args):
    dists = installed()
    for name in [a for a in args if not a.startswith("-")]:
        dist = dists.get(normalize(name))
        if dist is None:
            print("WARNING: Skipping %s as it is not installed." % name, file=sys.stderr)
            continue
        shutil.rmtree(str(dist._path))  # pylint: disable=protected-access
        print("Successfully uninstalled %s-%s" % (dist.metadata["Name"], dist.metadata["Version"]))
    return 0


def main(argv):
    args = [a for a in argv if a not in ("-q", "--quiet", "-v", "--verbose", "--no-cache-dir", "--disable-pip-version-check",
                                         "--no-input", "--isolated")]
    if not args or args[0] in ("-h", "--help", "help"):
        print("Usage: pip <command> [options]  (the mock cloud's pip: install, show, list, freeze, uninstall)")
        return 0
    if args[0] in ("-V", "--version"):
        print("pip %s from %s (python %d.%d) (the mock cloud's stand-in)" % (VERSION, os.path.dirname(__file__),
                                                                           *sys.version_info[:2]))
        return 0
    command, rest = args[0], args[1:]
    if command == "install":
        return install(rest)
    if command == "show":
        return show(rest)
    if command in ("list", "freeze"):
        return listing(rest, command == "freeze")
    if command == "uninstall":
        return uninstall(rest)
    fail('unknown command "%s"' % command)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
