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

# qemu_build SRC BLD LOG CONFIGURE-ARGS...: configure QEMU's tree SRC into
# BLD (only when the arguments changed: the stamp is named by their hash;
# the configure output goes to LOG), then build qemu-system-x86_64.
qemu_build() {
	local src=$1 bld=$2 log=$3 stamp
	shift 3
	stamp=$bld/.configured.$(echo "$*" | sha1sum | cut -c1-12)
	if [ ! -e "$stamp" ]; then
		rm -rf "$bld"
		mkdir -p "$bld"
		(cd "$bld" && "$src/configure" "$@") > "$log" 2>&1 || {
			tail -30 "$log" >&2
			exit 1
		}
		touch "$stamp"
	fi
	ninja -C "$bld" qemu-system-x86_64
}
