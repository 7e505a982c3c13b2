#!/usr/bin/env bash
# scripts/check-layers passes on the project's tree, and fails on a copy of it where a lower layer includes a higher
# one, naming the file, the line and the edge. Usage: tests/check_layers_test.sh SOURCE_DIR
set -euo pipefail
root="$1"
"$root/scripts/check-layers" --root "$root"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r "$root/src" "$root/include" "$root/mock_cloud" "$tmp/"
for edge in "src/util/strings.cpp jobman/core/jobs.hpp util core" \
            "src/cloud/http.cpp jobman/config/settings.hpp cloud config" \
            "src/store/schema.cpp jobman/remote/gcloud.hpp store remote" \
            "src/reporting/report.cpp jobman/cli/app.hpp reporting cli" \
            "src/ui/server.cpp jobman/cli/app.hpp ui cli" \
            "mock_cloud/src/server.cpp jobman/store/job_store.hpp mock store"; do
  read -r file include from to <<< "$edge"
  cp "$root/$file" "$tmp/$file.orig"
  { printf '#include "%s"\n' "$include"; cat "$root/$file"; } > "$tmp/$file"
  if out="$("$root/scripts/check-layers" --root "$tmp")"; then
    echo "check-layers passed with $file including $include:"
    echo "$out"
    exit 1
  fi
  expected="$file:1: layer $from may not include $to (\"$include\")"
  if ! grep -qF "$expected" <<< "$out"; then
    echo "check-layers did not say: $expected"
    echo "$out"
    exit 1
  fi
  mv "$tmp/$file.orig" "$tmp/$file"
done
echo "check-layers: every wrong include was named"
