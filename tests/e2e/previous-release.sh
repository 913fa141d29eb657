#!/bin/bash
# Builds (or reuses) the previous release's .deb for one Slurm, for the
# upgrade test. There are no release tags: the previous release is the
# parent of the commit that last changed the workspace version line of
# Cargo.toml. It is built in a git worktree with its own scripts, the plugin
# from ROOTFS's Slurm headers, and cached by commit; the .deb is copied into
# target/previous-release/ (inside the checkout, so a rootfs sees it).
# It is compiled at opt-level 0 (CARGO_PROFILE_RELEASE_OPT_LEVEL, which its
# own scripts' cargo calls inherit): the upgrade test proves the package's
# upgrade path and the running job's domain across it, never the old
# binaries' speed, and a fresh CI machine pays for this whole second build
# (on 2 cores: 250 s for the workspace at opt-level 3):
#   tests/e2e/previous-release.sh ROOTFS      # prints the copy's path
# Exit 3 when this checkout has no such commit (a shallow clone, or no bump yet).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
root=$(cd "${1:?usage: previous-release.sh ROOTFS}" && pwd)
bump=$(git -C "$REPO" log -1 --format=%H -G'^version = "' -- Cargo.toml 2>/dev/null || true)
old=$( [ -n "$bump" ] && git -C "$REPO" rev-parse -q --verify "$bump^" 2>/dev/null || true)
if [ -z "$old" ]; then
  echo "previous-release: no commit before the last version bump in this checkout (shallow clone?)" >&2
  exit 3
fi
arch=$(dpkg --print-architecture)
cache=${SLURM_IMEX_PREVIOUS_CACHE:-/var/cache/slurm-imex/previous}/$old
mm=$(sed -n 's/^#define SLURM_VERSION_NUMBER 0x\([0-9a-fA-F]\{4\}\).*/\1/p' "$root/usr/include/slurm/slurm_version.h")
mm=$(printf '%d.%02d' "$((16#${mm:0:2}))" "$((16#${mm:2:2}))")
# The cached .deb, copied where a rootfs sees the checkout.
publish() {
  local deb; deb=$(ls "$cache"/slurm-imex_*+slurm"$mm"_"$arch".deb)
  mkdir -p "$REPO/target/previous-release"
  cp "$deb" "$REPO/target/previous-release/"
  echo "$REPO/target/previous-release/$(basename "$deb")"
}
if ls "$cache"/slurm-imex_*+slurm"$mm"_"$arch".deb >/dev/null 2>&1; then publish; exit 0; fi
wt=$cache.worktree
rm -rf "$wt"; git -C "$REPO" worktree prune
git -C "$REPO" worktree add --detach -f "$wt" "$old" >/dev/null 2>&1
start=$SECONDS
echo "previous-release: building $(git -C "$REPO" log -1 --format='%h (%s)' "$old" | cut -c1-80) for Slurm $mm" >&2
if ! (cd "$wt" && export CARGO_PROFILE_RELEASE_OPT_LEVEL=0 && scripts/build-plugins.sh "$root" && scripts/package.sh) \
     > "$cache.build.log" 2>&1; then
  echo "previous-release: the build failed; last lines of $cache.build.log:" >&2
  tail -5 "$cache.build.log" >&2
  exit 1
fi
mkdir -p "$cache"
cp "$wt"/target/debian/slurm-imex_*+slurm"$mm"_"$arch".deb "$cache/"
git -C "$REPO" worktree remove --force "$wt"
echo "previous-release: built in $((SECONDS - start)) s" >&2
publish
