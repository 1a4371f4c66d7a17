#!/bin/bash
# Run apt-get against a private source list that adds bookworm-backports,
# trixie and sid (deb-src) to the machine's own Debian mirror.  The mirror URIs are
# taken from the machine's apt configuration; no host name lives in this repo.
# Usage: scripts/apt-private.sh <apt-get arguments...>
#        scripts/apt-private.sh cache <apt-cache arguments...>
#        scripts/apt-private.sh mirror   (print the Debian mirror URI)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
state=${VRNIC_APT_DIR:-$top/build/apt}
mkdir -p "$state/lists/partial"

mirror_uri() {
	# First URI serving the plain "bookworm" suite (deb822 or one-line style).
	local f uri
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		uri=$(awk 'BEGIN{RS="";FS="\n"}
			/Suites:[^\n]*bookworm([ \n]|$)/ && !/debian-security/ {
				for (i = 1; i <= NF; i++) if ($i ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", $i); split($i, a, " "); print a[1]; exit } }' "$f")
		[ -n "$uri" ] && { echo "$uri"; return; }
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		uri=$(awk '$1 == "deb" && $3 == "bookworm" { for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) { print $i; exit } }' "$f")
		[ -n "$uri" ] && { echo "$uri"; return; }
	done
	echo "apt-private: cannot find the machine's Debian mirror" >&2
	exit 1
}

if [ "${1:-}" = mirror ]; then
	mirror_uri
	exit 0
fi

list="$state/sources.list"
# sid (deb-src): the unmodified QEMU that the vfio-user gate builds
# (scripts/build-qemu-stock.sh).  A list from before a line was added here
# is rewritten, and the indexes fetched again.
if [ ! -s "$list" ] || ! grep -q " sid main" "$list"; then
	uri=$(mirror_uri)
	cat > "$list.tmp" <<LIST
deb $uri bookworm main
deb $uri bookworm-updates main
deb $uri bookworm-backports main
deb-src $uri bookworm-backports main
deb-src $uri trixie main
deb-src $uri sid main
LIST
	mv "$list.tmp" "$list"
	rm -f "$state/lists/.updated"
fi

opts=(-o "Dir::Etc::sourcelist=$list" -o "Dir::Etc::sourceparts=/dev/null"
      -o "Dir::State::Lists=$state/lists" -o "APT::Get::List-Cleanup=0"
      -o "Acquire::Retries=3")
if [ ! -e "$state/lists/.updated" ] || [ "${1:-}" = update ]; then
	apt-get "${opts[@]}" update >&2
	touch "$state/lists/.updated"
	[ "${1:-}" = update ] && exit 0
fi
if [ "${1:-}" = cache ]; then
	shift
	exec apt-cache "${opts[@]}" "$@"
fi
exec apt-get "${opts[@]}" "$@"
