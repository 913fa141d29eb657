#!/bin/bash
# shellcheck shell=bash
# The table of Slurm releases (scripts/slurm-releases), for the scripts that
# build, package and test for every release. Sourced, it defines:
#   releases                    every release, in order (22.05 … 26.05)
#   release_field REL FIELD     REL's tested, from, deb, phases or about
#   releases_from KIND          the releases whose `from` is KIND or KIND:…
#                               (host, rootfs, source), in order
#   release_next REL            the release after REL (the one before it,
#                               for the newest): a package for REL must be
#                               refused beside it
# Run, it prints what the table makes:
#   scripts/releases.sh list            the releases, one a line
#   scripts/releases.sh cargo-variants  the [package.metadata.deb.variants.*]
#                                       block cli/Cargo.toml holds
#   scripts/releases.sh sync            writes that block into cli/Cargo.toml
#                                       (between its two marker lines)
#   scripts/releases.sh check           exit 1, saying why, when cli/Cargo.toml's
#                                       block is not what the table makes
# Hand-read: a line is whitespace-separated fields and an optional
# "# about" comment; nothing on these machines reads such a table for bash.
RELEASES_TABLE=${RELEASES_TABLE:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/slurm-releases}

# The table's lines, without comment lines or blank ones, as
# "release tested from deb phase…|about".
_release_lines() {
  awk '/^[[:space:]]*(#|$)/ { next }
       { about = ""; line = $0; i = index(line, "#")
         if (i > 0) { about = substr(line, i + 1); line = substr(line, 1, i - 1) }
         sub(/^[[:space:]]+/, "", about); sub(/[[:space:]]+$/, "", line)
         gsub(/[[:space:]]+/, " ", line); print line "|" about }' "$RELEASES_TABLE"
}

releases() { _release_lines | cut -d' ' -f1; }

release_field() { # release field
  local line fields about
  line=$(_release_lines | awk -v r="$1" '$1 == r && !seen { print; seen = 1 }')
  [ -n "$line" ] || { echo "releases: no release $1 in $RELEASES_TABLE" >&2; return 1; }
  fields=${line%%|*}; about=${line#*|}
  # shellcheck disable=SC2086 # the fields, split on purpose
  set -- $fields "$2"
  local want=${!#}
  case $want in
    tested) echo "$2";;
    from) echo "$3";;
    deb) echo "$4";;
    phases) shift 4; set -- "${@:1:$#-1}"; echo "$*";;
    about) echo "$about";;
    *) echo "releases: no field '$want' (tested, from, deb, phases, about)" >&2; return 1;;
  esac
}

releases_from() { # kind
  _release_lines | awk -v k="$1" '{ split($3, f, ":") } f[1] == k { print $1 }'
}

release_next() { # release
  local all; all=$(releases)
  grep -qx -- "$1" <<<"$all" || { echo "releases: no release $1 in $RELEASES_TABLE" >&2; return 1; }
  if [ "$1" = "$(tail -n 1 <<<"$all")" ]; then grep -B1 -x -- "$1" <<<"$all" | sed -n 1p
  else grep -A1 -x -- "$1" <<<"$all" | tail -n 1; fi
}

# The .deb variant of one release, as cargo-deb reads it from cli/Cargo.toml.
_cargo_variant() { # release
  local rel=$1 deb about next_minor
  deb=$(release_field "$rel" deb); about=$(release_field "$rel" about)
  next_minor=$(printf '%02d' $((10#${rel#*.} + 1)))
  case $deb in
    none) return 0;;
    wlm)
      printf '\n# %s\n[package.metadata.deb.variants.slurm%s]\nname = "slurm-imex"\n' "$about" "${rel/./-}"
      printf 'depends = "$auto, slurm-wlm-basic-plugins (>= %s~), slurm-wlm-basic-plugins (<< %s~)"\n' \
        "$rel" "${rel%.*}.$next_minor"
      printf 'merge-assets.append = [\n  ["../target/deb-plugin/*/slurm-wlm/*.so", "usr/lib/", "644"],\n]\n';;
    both)
      printf '\n# %s\n[package.metadata.deb.variants.slurm%s]\nname = "slurm-imex"\n' "$about" "${rel/./-}"
      printf 'depends = "$auto, slurm-wlm-basic-plugins (>= %s~) | slurm-smd (>= %s~), slurm-wlm-basic-plugins (<< %s~) | slurm-smd (<< %s~)"\n' \
        "$rel" "$rel" "${rel%.*}.$next_minor" "${rel%.*}.$next_minor"
      printf 'merge-assets.append = [\n  ["../target/deb-plugin/*/slurm-wlm/*.so", "usr/lib/", "644"],\n  ["../target/deb-plugin/*/slurm/*.so", "usr/lib/", "644"],\n]\n';;
    *) echo "releases: $rel: deb is wlm, both or none, not '$deb'" >&2; return 1;;
  esac
}

CARGO_BEGIN='# BEGIN the .deb variants: written by scripts/releases.sh sync from scripts/slurm-releases; do not edit'
CARGO_END='# END the .deb variants'

cargo_variants() {
  local rel
  echo "$CARGO_BEGIN"
  for rel in $(releases); do _cargo_variant "$rel" || return 1; done
  echo "$CARGO_END"
}

# cli/Cargo.toml's block between the markers, markers included.
_cargo_block() { # manifest
  sed -n "/^$(sed 's/[.[\*^$/]/\\&/g' <<<"$CARGO_BEGIN")\$/,/^$CARGO_END\$/p" "$1"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  manifest=$(cd "$(dirname "$0")/.." && pwd)/cli/Cargo.toml
  case ${1:-} in
    list) releases;;
    cargo-variants) cargo_variants;;
    check)
      want=$(cargo_variants); have=$(_cargo_block "$manifest")
      [ -n "$have" ] || { echo "releases: $manifest has no block between the markers ($CARGO_BEGIN)" >&2; exit 1; }
      [ "$want" = "$have" ] || { echo "releases: $manifest's .deb variants are not what scripts/slurm-releases makes: run scripts/releases.sh sync" >&2; diff <(echo "$have") <(echo "$want") >&2 || true; exit 1; };;
    sync)
      want=$(cargo_variants)
      grep -qxF "$CARGO_BEGIN" "$manifest" || { echo "releases: $manifest has no line '$CARGO_BEGIN'" >&2; exit 1; }
      awk -v begin="$CARGO_BEGIN" -v end="$CARGO_END" -v block="$want" '
        $0 == begin { print block; skip = 1; next }
        skip && $0 == end { skip = 0; next }
        !skip { print }' "$manifest" > "$manifest.tmp"
      mv "$manifest.tmp" "$manifest";;
    *) echo "usage: scripts/releases.sh list|cargo-variants|sync|check" >&2; exit 2;;
  esac
fi
