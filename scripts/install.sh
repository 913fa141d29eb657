#!/bin/bash
# install.sh — install slurm-imex for a Slurm that is not Debian's own
# packages: a source build in a prefix (AWS ParallelCluster's /opt/slurm,
# Base Command Manager's /cm/shared/apps/slurm/<version>), SchedMD's RPMs
# (--slurm-prefix /usr). Run it as root from an unpacked release tarball
# (scripts/release.sh makes one); it rebuilds nothing.
#
#   ./install.sh --slurm-prefix /opt/slurm            # install, print the lines to add
#   ./install.sh --slurm-prefix /opt/slurm --dry-run  # say what would be done
#   ./install.sh --uninstall                          # remove what install.sh put down
#
# What it does:
#  * learns the Slurm version from <slurm-prefix>'s slurmd -V (else
#    slurmctld -V, scontrol --version) and checks it against
#    <slurm-prefix>/include/slurm/slurm_version.h when present;
#  * picks plugins/<major.minor>/spank_imex.so, the plugin stamped for it;
#  * learns PluginDir and the config directory from `scontrol show config`
#    when the controller answers, else from the prefix's layout
#    (<prefix>/lib/slurm or lib64/slurm; <prefix>/etc, or /etc/slurm for
#    /usr as slurm.spec builds it); --plugin-dir and --sysconfdir override;
#  * installs the prolog, epilog and CLI under --prefix (default /usr/local),
#    the plugin into PluginDir, the HealthCheckProgram wrapper, imex.toml
#    beside slurm.conf (never over an existing one) with scontrol set to this
#    Slurm's, and the SERVER_PORT reservation in /etc/sysctl.d (applied now);
#  * records every file it wrote in <prefix>/share/slurm-imex/installed-files
#    for --uninstall (which keeps imex.toml, as dpkg keeps a conffile);
#  * prints the exact plugstack.conf and slurm.conf lines for this site.
set -euo pipefail
PAYLOAD=$(cd "$(dirname "$0")" && pwd)
slurm_prefix= prefix=/usr/local sysconfdir= plugin_dir= dry_run=0 uninstall=0
sysctl_file=/etc/sysctl.d/90-slurm-imex.conf

die() { echo "install.sh: $*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-0}"; }

# One absolute, plain path (no newline, no relative parts): every value we
# write into a config or a printed line comes through here.
checked_path() { # option value
  local v=$2
  case $v in
    /*) ;;
    *) die "$1 '$v' is not an absolute path: give one such as /opt/slurm";;
  esac
  [[ $v == *$'\n'* || $v == *[[:cntrl:]]* || $v == *' '* || $v == *'"'* ]] &&
    die "$1 must not contain spaces, quotes or control characters"
  [[ $v == */../* || $v == */.. || $v == */./* ]] && die "$1 '$v' must not contain . or .. parts"
  printf '%s' "${v%/}"
}

parse_args() {
  while [ $# -gt 0 ]; do
    case $1 in
      --slurm-prefix) [ $# -ge 2 ] || die "--slurm-prefix needs a directory"; slurm_prefix=$(checked_path --slurm-prefix "$2"); shift 2;;
      --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; prefix=$(checked_path --prefix "$2"); shift 2;;
      --sysconfdir) [ $# -ge 2 ] || die "--sysconfdir needs a directory"; sysconfdir=$(checked_path --sysconfdir "$2"); shift 2;;
      --plugin-dir) [ $# -ge 2 ] || die "--plugin-dir needs a directory"; plugin_dir=$(checked_path --plugin-dir "$2"); shift 2;;
      --dry-run) dry_run=1; shift;;
      --uninstall) uninstall=1; shift;;
      -h|--help) usage 0;;
      *) die "unknown option '$1' (see --help)";;
    esac
  done
  [ -n "$prefix" ] || prefix=/
  if [ "$uninstall" = 0 ] && [ -z "$slurm_prefix" ]; then
    die "say where Slurm is installed: --slurm-prefix /opt/slurm (the directory holding bin/scontrol)"
  fi
}

# "24.11.5" from the first of slurmd -V, slurmctld -V and scontrol --version
# that answers ("slurm 24.11.5"): the daemons print it without a slurm.conf,
# which scontrol needs (it is not written yet on a fresh install).
slurm_version() {
  local p out
  [ -x "$slurm_prefix/bin/scontrol" ] || die "no $slurm_prefix/bin/scontrol: --slurm-prefix must be the directory holding bin/scontrol"
  for p in "sbin/slurmd -V" "sbin/slurmctld -V" "bin/scontrol --version"; do
    [ -x "$slurm_prefix/${p%% *}" ] || continue
    out=$(timeout 10 "$slurm_prefix/${p%% *}" "${p#* }" 2>/dev/null) || continue
    out=${out##* }
    [[ $out =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]] && { printf '%s' "${BASH_REMATCH[0]}"; return; }
  done
  header_version | grep . || die "cannot learn the Slurm version: none of slurmd -V, slurmctld -V, scontrol --version answered and $slurm_prefix/include/slurm/slurm_version.h is missing"
}

# The header's SLURM_VERSION_NUMBER as "24.11.5", when the prefix has headers.
header_version() {
  local h=$slurm_prefix/include/slurm/slurm_version.h hex
  [ -f "$h" ] || return 0
  hex=$(sed -n 's/^#define SLURM_VERSION_NUMBER 0x\([0-9a-fA-F]\{6\}\).*/\1/p' "$h")
  [ -n "$hex" ] || return 0
  printf '%d.%02d.%d' "$((16#${hex:0:2}))" "$((16#${hex:2:2}))" "$((16#${hex:4:2}))"
}

# One value of `scontrol show config` ("Key = value"), empty when the
# controller does not answer within 5 s (install before slurmctld runs).
show_config_value() {
  awk -v k="$1" '$1 == k && $2 == "=" { sub(/^[^=]*= */, ""); print; exit }' <<<"$SHOW_CONFIG"
}

learn_layout() {
  if [ -z "$plugin_dir" ]; then
    plugin_dir=$(show_config_value PluginDir); plugin_dir=${plugin_dir%%:*}
    if [ -z "$plugin_dir" ]; then
      for d in "$slurm_prefix/lib/slurm" "$slurm_prefix/lib64/slurm" "$slurm_prefix/lib/x86_64-linux-gnu/slurm"; do
        compgen -G "$d/auth_*.so" >/dev/null && { plugin_dir=$d; break; }
      done
    fi
    [ -n "$plugin_dir" ] || die "no Slurm PluginDir under $slurm_prefix (no lib/slurm/auth_*.so): give --plugin-dir"
  fi
  [ -d "$plugin_dir" ] || die "PluginDir $plugin_dir is not a directory: give --plugin-dir"
  if [ -z "$sysconfdir" ]; then
    local conf; conf=$(show_config_value SLURM_CONF)
    if [ -n "$conf" ]; then sysconfdir=$(dirname "$conf")
    # Installed in /usr (slurm.spec's RPMs): sysconfdir /etc/slurm.
    elif [ "$slurm_prefix" = /usr ]; then sysconfdir=/etc/slurm
    else sysconfdir=$slurm_prefix/etc; fi
  fi
  [ -d "$sysconfdir" ] || die "Slurm's config directory $sysconfdir does not exist: give --sysconfdir"
}

# install(1) into a temporary name, then rename: never a half-written file.
put() { # mode source dest
  local dest=$3
  if [ "$dry_run" = 1 ]; then echo "would install $dest"; return; fi
  mkdir -p "$(dirname "$dest")"
  install -m "$1" -o root -g root "$2" "$dest.slurm-imex-new"
  mv -f "$dest.slurm-imex-new" "$dest"
  echo "$dest" >> "$MANIFEST.new"
}

write_file() { # mode dest (contents on stdin)
  local tmp; tmp=$(mktemp)
  cat > "$tmp"
  put "$1" "$tmp" "$2"
  rm -f "$tmp"
}

install_files() {
  local mm=$1 b
  for b in slurm-imex-prolog slurm-imex-epilog; do put 0755 "$PAYLOAD/bin/$b" "$prefix/sbin/$b"; done
  put 0755 "$PAYLOAD/bin/slurm-imex" "$prefix/bin/slurm-imex"
  put 0644 "$PAYLOAD/plugins/$mm/spank_imex.so" "$plugin_dir/spank_imex.so"
  write_file 0755 "$prefix/sbin/slurm-imex-healthcheck" <<EOF
#!/bin/sh
# slurm.conf HealthCheckProgram (Slurm runs it without arguments), written by
# slurm-imex install.sh: drains the node with an "imex-health:" reason on a
# drain-class finding; resumes it when healthy only if we drained it.
exec $prefix/bin/slurm-imex --config $sysconfdir/imex.toml check --drain --undrain
EOF
  write_file 0644 "$sysctl_file" < "$PAYLOAD/conf-examples/sysctl.d/90-slurm-imex.conf"
  local page; for page in "$PAYLOAD"/share/man/*.[18]; do
    [ -e "$page" ] || continue
    put 0644 "$page" "$prefix/share/man/man${page##*.}/$(basename "$page")"
  done
  if [ -e "$sysconfdir/imex.toml" ]; then
    echo "kept $sysconfdir/imex.toml (yours; the shipped one is $PAYLOAD/conf-examples/imex.toml)"
  elif [ "$dry_run" = 1 ]; then
    echo "would install $sysconfdir/imex.toml"
  else
    local tmp; tmp=$(mktemp)
    sed "s#^scontrol = .*#scontrol = \"$slurm_prefix/bin/scontrol\"#" "$PAYLOAD/conf-examples/imex.toml" > "$tmp"
    grep -qF "scontrol = \"$slurm_prefix/bin/scontrol\"" "$tmp" || die "could not set scontrol in imex.toml"
    install -m 0644 -o root -g root "$tmp" "$sysconfdir/imex.toml.slurm-imex-new"
    mv -f "$sysconfdir/imex.toml.slurm-imex-new" "$sysconfdir/imex.toml"
    rm -f "$tmp"
  fi
}

print_site_lines() {
  cat <<EOF

# plugstack.conf ($(show_config_value PlugStackConfig | grep . || echo "$sysconfdir/plugstack.conf"); on login and compute nodes):
required $plugin_dir/spank_imex.so config=$sysconfdir/imex.toml

# slurm.conf ($sysconfdir/slurm.conf), then restart slurmctld and slurmd:
PrologFlags=Alloc
Prolog=$prefix/sbin/slurm-imex-prolog
Epilog=$prefix/sbin/slurm-imex-epilog
HealthCheckProgram=$prefix/sbin/slurm-imex-healthcheck
HealthCheckInterval=300

# Then check the node: $prefix/bin/slurm-imex --config $sysconfdir/imex.toml doctor
# (the prolog finds imex.toml beside the slurm.conf slurmd gives it; in a
# shell, set SLURM_CONF=$sysconfdir/slurm.conf or pass --config).
EOF
}

do_uninstall() {
  local manifest=$prefix/share/slurm-imex/installed-files f
  [ -f "$manifest" ] || die "nothing to uninstall: $manifest is missing"
  while IFS= read -r f; do
    case $f in /*) ;; *) continue;; esac
    if [ "$dry_run" = 1 ]; then echo "would remove $f"; else rm -f -- "$f"; fi
  done < "$manifest"
  [ "$dry_run" = 1 ] && return
  rm -f "$manifest"; rmdir "$prefix/share/slurm-imex" 2>/dev/null || true
  echo "removed slurm-imex (imex.toml is kept; remove the plugstack.conf and slurm.conf lines yourself)"
}

main() {
  parse_args "$@"
  [ "$(id -u)" = 0 ] || [ "$dry_run" = 1 ] || die "run as root (it writes under $prefix and into Slurm's PluginDir)"
  if [ "$uninstall" = 1 ]; then do_uninstall; return; fi
  [ -x "$PAYLOAD/bin/slurm-imex-prolog" ] && [ -d "$PAYLOAD/plugins" ] ||
    die "run me from an unpacked release tarball (scripts/release.sh makes one)"
  local version header mm
  version=$(slurm_version)
  header=$(header_version)
  [ -z "$header" ] || [ "$header" = "$version" ] ||
    die "scontrol says Slurm $version but $slurm_prefix/include/slurm/slurm_version.h says $header: which Slurm is installed?"
  mm=${version%.*}
  [ -f "$PAYLOAD/plugins/$mm/spank_imex.so" ] ||
    die "no plugin for Slurm $mm in this release (it has: $(ls "$PAYLOAD/plugins" | paste -sd ' ')); build one from a source checkout: scripts/build-plugins.sh prefix=$slurm_prefix"
  SHOW_CONFIG=$(timeout 5 "$slurm_prefix/bin/scontrol" show config 2>/dev/null || true)
  learn_layout
  MANIFEST=$prefix/share/slurm-imex/installed-files
  echo "slurm-imex $(cat "$PAYLOAD/VERSION") for Slurm $version ($slurm_prefix): PluginDir $plugin_dir, config $sysconfdir"
  [ "$dry_run" = 1 ] || { mkdir -p "$(dirname "$MANIFEST")"; : > "$MANIFEST.new"; }
  install_files "$mm"
  if [ "$dry_run" = 0 ]; then
    echo "$MANIFEST" >> "$MANIFEST.new"
    mv -f "$MANIFEST.new" "$MANIFEST"
    sysctl -q -p "$sysctl_file" || echo "install.sh: could not apply $sysctl_file now; it applies at boot (sysctl --system)" >&2
  fi
  print_site_lines
}
main "$@"
