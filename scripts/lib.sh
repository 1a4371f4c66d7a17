# Helpers shared by the build scripts (source it).

# sync_file SRC DST: copy only when the contents differ, so that ninja and
# make see unchanged files as unchanged.
sync_file() {
	if ! cmp -s "$1" "$2"; then
		mkdir -p "$(dirname "$2")"
		cp "$1" "$2"
	fi
}

# patch_once FILE PATTERN SED-SCRIPT: apply a one-line edit to an upstream
# build file unless PATTERN shows it is already there; fail if it did not
# take (the upstream file changed shape).
patch_once() {
	grep -q -- "$2" "$1" || sed -i "$3" "$1"
	grep -q -- "$2" "$1" || { echo "patch_once: cannot patch $1" >&2; exit 1; }
}
