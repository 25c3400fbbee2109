# Sourced by the hack/build-*.sh scripts: one way to build a tool binary from its own module
# under test/tools into bin/, once, with a cache shared by every checkout of this machine.
#
#   gobuild_cached PREFIX NAME MODULE_DIR PACKAGE OUT [LDFLAGS...]
#
# builds PACKAGE inside MODULE_DIR into OUT. The binary is keyed by what decides its bytes: the
# Go version, the package, the flags, and the module's go.mod, go.sum and top-level .go files. A
# key found in $PODPATCH_CACHE/bin (default ~/.cache/podpatch/bin) is copied into place without
# building: a fresh clone on a machine that built the same tools before (CI after a session, a
# second worktree) links nothing. OUT is replaced only by a complete binary (built to a
# temporary file and renamed), so an interrupted build never leaves one that looks up to date.
# GOBUILD_NO_CACHE=1 turns the shared cache off. Progress goes to standard error.

gobuild_key() {
	local dir=$1
	shift
	{
		"$GO" env GOVERSION GOOS GOARCH
		printf '%s\n' "$@"
		local f
		# An if, not `[[ -e ]] && …`: a module with no .go file ends the loop on a false test,
		# which pipefail (the calling scripts' set -o) would make this function's failure.
		for f in "$dir"/go.mod "$dir"/go.sum "$dir"/*.go; do
			if [[ -e $f ]]; then
				sha256sum "$f" | cut -d' ' -f1
			fi
		done
	} | sha256sum | cut -c1-16
}

gobuild_cached() {
	local prefix=$1 name=$2 dir=$3 pkg=$4 out=$5
	shift 5
	[[ -f $dir/go.mod ]] || { echo "$prefix: error: $dir/go.mod is missing" >&2; return 1; }
	local key cache entry stamp
	key=$(gobuild_key "$dir" "$name" "$pkg" "$@") || return 1
	cache=${PODPATCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/podpatch}/bin
	entry=$cache/$name-$key
	stamp=$out.key
	if [[ -x $out && -f $stamp && $(<"$stamp") == "$key" ]]; then
		echo "$prefix: $out is up to date" >&2
		return 0
	fi
	local tmp=$out.tmp.$$
	if [[ ${GOBUILD_NO_CACHE:-} != 1 && -x $entry ]]; then
		cp -f "$entry" "$tmp" && mv -f "$tmp" "$out" && printf '%s\n' "$key" >"$stamp" || {
			rm -f "$tmp"
			return 1
		}
		echo "$prefix: $out from the build cache ($entry)" >&2
		return 0
	fi
	echo "$prefix: building $out from $pkg (module ${dir#"$root"/}) ..." >&2
	local start=$SECONDS
	local goflags=${GOFLAGS:-}
	[[ " $goflags " == *" -mod=readonly "* ]] || goflags="${goflags:+$goflags }-mod=readonly"
	if ! (cd "$dir" && GOWORK=off GOFLAGS=$goflags CGO_ENABLED=0 "$GO" build -trimpath -ldflags="-s -w $*" -o "$tmp" "$pkg"); then
		rm -f "$tmp"
		echo "$prefix: error: building $name failed (see the go output above)" >&2
		return 1
	fi
	mv -f "$tmp" "$out" || return 1
	printf '%s\n' "$key" >"$stamp"
	local s=$((SECONDS - start))
	echo "$prefix: built $out in ${s}s ($(du -h "$out" | cut -f1))" >&2
	if [[ ${GOBUILD_NO_CACHE:-} != 1 ]] && mkdir -p "$cache" 2>/dev/null; then
		# Older builds of the same tool are dropped: the cache holds one binary per tool and key.
		rm -f "$cache/$name"-????????????????
		cp -f "$out" "$entry.tmp.$$" && mv -f "$entry.tmp.$$" "$entry" || rm -f "$entry.tmp.$$"
	fi
}

# kube_ldflags VERSION: sets the array kldflags to the -X flags that stamp a Kubernetes binary
# with its version (release builds do; an unstamped `go build` calls itself v0.0.0-master).
kube_ldflags() {
	local v=$1 p
	[[ $v =~ ^v([0-9]+)\.([0-9]+)\. ]] || return 1
	kldflags=()
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		kldflags+=("-X $p.gitVersion=$v" "-X $p.gitMajor=${BASH_REMATCH[1]}"
			"-X $p.gitMinor=${BASH_REMATCH[2]}" "-X $p.gitTreeState=clean")
	done
}
