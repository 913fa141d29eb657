#!/bin/bash
# What ships runs where we say it runs (docs/install.md, "Which machines"):
# every ELF file in every release tarball, .deb and RPM we built is for the
# architecture its name says (file(1)), and needs no glibc symbol version
# newer than the floor, GLIBC_2.34 (RHEL/Rocky 9; readelf, which reads any
# architecture's ELF). Fails on any newer symbol, naming the file and the
# symbols, and when a named architecture has no artifact at all.
#
#   tests/glibc-floor.sh [--require=amd64,arm64] [ARTIFACT...]
#       ARTIFACT: a .deb, an .rpm, a release .tar.gz, or an ELF file with
#       its architecture after a colon (target/x:arm64). Default: every
#       target/debian/*.deb, target/rpm/*.rpm and
#       target/release-tarball/*.tar.gz.
# Prints one line per ELF file and "glibc-floor: N files checked, M failed".
set -uo pipefail
FLOOR=${GLIBC_FLOOR:-2.34}
REPO=$(cd "$(dirname "$0")/.." && pwd)
require=
case ${1:-} in --require=*) require=${1#--require=}; shift;; esac
if [ $# -eq 0 ]; then
  shopt -s nullglob
  set -- "$REPO"/target/debian/*.deb "$REPO"/target/rpm/*.rpm "$REPO"/target/release-tarball/*.tar.gz
fi
work=$(mktemp -d /tmp/glibc-floor.XXXXXX)
trap 'rm -rf "$work"' EXIT
checked=0 failed=0 seen=

# What file(1) says of each Debian architecture's executables.
file_says() { # debian-arch
  case $1 in
    amd64) echo 'x86-64';;
    arm64) echo 'ARM aarch64';;
    *) echo "unknown architecture $1";;
  esac
}

# The Debian architecture a tarball's name gives (slurm-imex-V-<cpu>-linux.tar.gz).
tarball_arch() {
  case $1 in
    *-x86_64-linux.tar.gz) echo amd64;;
    *-aarch64-linux.tar.gz) echo arm64;;
    *) echo unknown;;
  esac
}

check_elf() { # file arch label
  local f=$1 arch=$2 label=$3 desc newest newer
  desc=$(file -b "$f")
  checked=$((checked + 1))
  if [[ $desc != *"$(file_says "$arch")"* ]]; then
    echo "FAIL $label: built for the wrong architecture (want $arch): $desc"
    failed=$((failed + 1)); return
  fi
  newest=$(readelf -W -V "$f" | grep -o 'Name: GLIBC_[0-9.]*' | sed 's/Name: GLIBC_//' | sort -uV | tail -1)
  if [ -n "$newest" ] && [ "$(printf '%s\n%s\n' "$FLOOR" "$newest" | sort -V | tail -1)" != "$FLOOR" ]; then
    newer=$(readelf -W --dyn-syms "$f" | grep -o '[A-Za-z0-9_]*@GLIBC_[0-9.]*' | sort -u |
      while IFS=@ read -r sym ver; do
        v=${ver#GLIBC_}
        [ "$(printf '%s\n%s\n' "$FLOOR" "$v" | sort -V | tail -1)" = "$FLOOR" ] || echo "$sym@$ver"
      done | paste -sd ' ')
    echo "FAIL $label: needs GLIBC_$newest, newer than the floor GLIBC_$FLOOR: ${newer:-see readelf -V}"
    failed=$((failed + 1)); return
  fi
  echo "ok   $label: $arch, needs GLIBC_${newest:-none}"
}

# The Debian architecture of an RPM's (x86_64, aarch64).
rpm_arch() {
  case $(rpm -qp --qf '%{ARCH}' "$1" 2>/dev/null) in
    x86_64) echo amd64;;
    aarch64) echo arm64;;
    *) echo unknown;;
  esac
}

# Every ELF file under a directory.
check_tree() { # dir arch label-prefix
  local f
  while IFS= read -r -d '' f; do
    [ "$(head -c4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
    check_elf "$f" "$2" "$3${f#"$1"}"
  done < <(find "$1" -type f -print0 | sort -z)
}

n=0
for artifact in "$@"; do
  n=$((n + 1)); dir=$work/$n; mkdir -p "$dir"
  case $artifact in
    *.deb)
      arch=$(dpkg-deb -f "$artifact" Architecture)
      dpkg-deb -x "$artifact" "$dir" || { echo "FAIL $artifact: dpkg-deb -x failed"; failed=$((failed + 1)); continue; }
      check_tree "$dir" "$arch" "$(basename "$artifact"):";;
    *.rpm)
      arch=$(rpm_arch "$artifact")
      rpm2archive -n < "$artifact" | tar -x -C "$dir" ||
        { echo "FAIL $artifact: rpm2archive failed"; failed=$((failed + 1)); continue; }
      check_tree "$dir" "$arch" "$(basename "$artifact"):";;
    *.tar.gz)
      arch=$(tarball_arch "$artifact")
      tar -xzf "$artifact" -C "$dir" || { echo "FAIL $artifact: tar failed"; failed=$((failed + 1)); continue; }
      check_tree "$dir" "$arch" "$(basename "$artifact"):";;
    *:*)
      arch=${artifact##*:}
      check_elf "${artifact%:*}" "$arch" "${artifact%:*}";;
    *) echo "glibc-floor: what is $artifact? (a .deb, an .rpm, a .tar.gz, or FILE:ARCH)" >&2; exit 2;;
  esac
  seen="$seen $arch"
done
for arch in ${require//,/ }; do
  [[ " $seen " == *" $arch "* ]] || { echo "FAIL no artifact for $arch among: $*"; failed=$((failed + 1)); }
done
[ "$checked" -gt 0 ] || { echo "FAIL no ELF file found in: $*"; failed=$((failed + 1)); }
echo "glibc-floor: $checked files checked, $failed failed (floor GLIBC_$FLOOR)"
[ "$failed" = 0 ]
