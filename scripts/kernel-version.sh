#!/bin/bash
# Print the 6.12 kernel ABI name (for example 6.12.95+bpo-amd64) that the
# bookworm-backports metapackage linux-image-amd64 points at today.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cache=$top/build/kernel-version
if [ -s "$cache" ]; then cat "$cache"; exit 0; fi
dep=$("$top/scripts/apt-private.sh" cache show linux-image-amd64/bookworm-backports 2>/dev/null |
	sed -n 's/^Depends: .*\(linux-image-6\.12[^ ,]*\).*/\1/p' | head -n1)
[ -n "$dep" ] || { echo "kernel-version: no 6.12 kernel in bookworm-backports" >&2; exit 1; }
mkdir -p "$(dirname "$cache")"
echo "${dep#linux-image-}" | tee "$cache"
