#!/bin/bash
# The pinned aarch64 cross toolchain, and qemu for running arm64 programs.
#
#   scripts/cross-toolchain.sh builder   # makes (or reuses) the builder root
#                                        # filesystem; prints its path
#   scripts/cross-toolchain.sh binfmt    # registers qemu-aarch64 with binfmt_misc
#   scripts/cross-toolchain.sh run CMD…  # runs CMD in the builder, in this
#                                        # checkout, with the cross compiler's
#                                        # environment (CC_aarch64_…, the linker)
#
# The builder is a Debian 12 (bookworm) amd64 root filesystem holding
# Debian's rustc-web/cargo-web (from bookworm-security) with the arm64 std
# (libstd-rust-web-dev:arm64), gcc-aarch64-linux-gnu and libc6-dev-arm64-cross.
# Why this and not rustup: rustup cannot fetch another target's std on these
# machines, and the host's rustup std cannot be mixed with Debian's arm64 one
# (E0514). Why Debian 12: its glibc is 2.36, so Rust's std links against
# symbols no newer than GLIBC_2.34 (built against Debian 13's libc, std's
# pidfd_spawnp gets GLIBC_2.39 and the binaries fail on RHEL 9 and Ubuntu 22.04).
# libc6:arm64 gives qemu the arm64 loader for the unit tests.
#
# The toolchain is pinned: RUST_WEB_VERSION below. The builder is cached
# under $SLURM_IMEX_CROSS_CACHE (default /var/cache/slurm-imex/cross) with a
# stamp naming the pinned packages, so a machine that keeps it skips
# debootstrap and apt; a changed pin makes a new one.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
# Debian's rustc-web 1.96 in bookworm-security. The workspace's rust-version
# (1.88) is what the locked dependencies need; this is what builds them.
RUST_WEB_VERSION=${RUST_WEB_VERSION:-1.96.0+dfsg1-1~deb12u2}
cache=${SLURM_IMEX_CROSS_CACHE:-/var/cache/slurm-imex/cross}
root=$cache/bookworm-aarch64
packages=(
  "rustc-web=$RUST_WEB_VERSION" "cargo-web=$RUST_WEB_VERSION" "libstd-rust-web-dev:arm64=$RUST_WEB_VERSION"
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross libc6:arm64 libgcc-s1:arm64
  libclang-dev libslurm-dev qemu-user-static file binutils-aarch64-linux-gnu dpkg-dev ca-certificates
)

# The Debian mirrors apt already uses on this machine (deb822 or one-line format).
mirror() { # main|security
  local uris
  uris=$(awk '/^URIs:/{print $2}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$uris" ] || uris=$(awk '$1=="deb"{print $2}' /etc/apt/sources.list 2>/dev/null || true)
  case $1 in
    main) grep -v -- '-security' <<<"$uris" | sed -n 1p;;
    security) grep -- '-security' <<<"$uris" | sed -n 1p;;
  esac
}

make_builder() {
  local stamp=$root/.slurm-imex-cross-complete want
  want=$(printf '%s\n' "${packages[@]}")
  mkdir -p "$cache"
  exec 9>"$root.lock"
  flock 9
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then echo "$root"; return; fi
  local main security start=$SECONDS
  main=$(mirror main); security=$(mirror security)
  [ -n "$main" ] || { echo "cross-toolchain: no Debian mirror found in /etc/apt" >&2; exit 1; }
  [ -n "$security" ] || security=${main%/debian}/debian-security
  command -v debootstrap >/dev/null || {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  }
  rm -rf "$root.tmp"
  if ! debootstrap --variant=minbase --include=ca-certificates bookworm "$root.tmp" "$main" > "$root.log" 2>&1; then
    echo "cross-toolchain: debootstrap bookworm failed; last lines of $root.log:" >&2
    tail -5 "$root.log" >&2; exit 1
  fi
  printf 'deb %s bookworm main\ndeb %s bookworm-security main\n' "$main" "$security" > "$root.tmp/etc/apt/sources.list"
  # A CA a proxy on this machine may need.
  cp /usr/local/share/ca-certificates/*.crt "$root.tmp/usr/local/share/ca-certificates/" 2>/dev/null || true
  cp /etc/resolv.conf "$root.tmp/etc/resolv.conf" 2>/dev/null || true
  if ! "$REPO/tests/e2e/in-rootfs.sh" "$root.tmp" bash -ec '
      update-ca-certificates >/dev/null 2>&1 || true
      dpkg --add-architecture arm64
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
      apt-get clean' cross "${packages[@]}" >> "$root.log" 2>&1; then
    echo "cross-toolchain: apt-get install in the builder failed; last lines of $root.log:" >&2
    tail -5 "$root.log" >&2
    echo "cross-toolchain: if bookworm-security no longer offers rustc-web $RUST_WEB_VERSION, set RUST_WEB_VERSION (apt-cache policy rustc-web in $root.tmp)" >&2
    exit 1
  fi
  # The linker and C compiler for the target, named the way cargo and the cc crate look them up.
  cat > "$root.tmp/etc/profile.d/slurm-imex-cross.sh" <<'EOF'
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar
EOF
  echo "$want" > "$root.tmp/.slurm-imex-cross-complete"
  rm -rf "$root"
  mv "$root.tmp" "$root"
  echo "cross-toolchain: builder made in $((SECONDS - start)) s ($("$REPO/tests/e2e/in-rootfs.sh" "$root" rustc -V))" >&2
  echo "$root"
}

# qemu-aarch64 registered with the F flag (the interpreter opened once, so it
# runs arm64 programs inside any chroot or namespace): Debian's
# qemu-user-static with binfmt-support registers it that way.
register_binfmt() {
  mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    command -v update-binfmts >/dev/null || {
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user-static binfmt-support >/dev/null
    }
    update-binfmts --enable qemu-aarch64
  fi
  grep -q '^flags:.*F' /proc/sys/fs/binfmt_misc/qemu-aarch64 || {
    echo "cross-toolchain: qemu-aarch64 is registered without the F flag: arm64 programs will not run in a chroot" >&2
    exit 1
  }
}

# A command in the builder (made first if need be), with the target's
# compiler, linker and archiver named for cargo and the cc crate. cargo's
# registry cache stays in the builder's /root/.cargo, so it is cached too.
run_in_builder() {
  local builder
  builder=$(make_builder)
  "$REPO/tests/e2e/in-rootfs.sh" "$builder" bash -c '. /etc/profile.d/slurm-imex-cross.sh; exec "$@"' cross "$@"
}

case ${1:-} in
  builder) make_builder;;
  binfmt) register_binfmt;;
  run) shift; [ $# -gt 0 ] || { echo "cross-toolchain: run needs a command" >&2; exit 2; }; run_in_builder "$@";;
  *) echo "usage: cross-toolchain.sh builder|binfmt|run CMD..." >&2; exit 2;;
esac
