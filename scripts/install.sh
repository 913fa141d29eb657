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
#    Slurm's, and the SERVER_PORT span added to the site's reserved ports
#    (/etc/sysctl.d/90-slurm-imex.conf; applied now, unless in a chroot or
#    image build);
#  * records every file it wrote in <prefix>/share/slurm-imex/installed-files
#    for --uninstall (which keeps imex.toml, as dpkg keeps a conffile);
#  * prints the exact plugstack.conf and slurm.conf lines for this site.
# --uninstall refuses while slurm.conf or plugstack.conf still name
# slurm-imex (it lists the lines to remove first), and acts only on a
# manifest that root owns, in directories only root can change.
set -euo pipefail
PAYLOAD=$(cd "$(dirname "$0")" && pwd)
slurm_prefix='' prefix=/usr/local sysconfdir='' plugin_dir='' plugstack='' dry_run=0 uninstall=0

die() { echo "install.sh: $*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-0}"; }

# One absolute, plain path that every line we print or write can hold as
# Slurm reads it: plugstack.conf splits on whitespace and drops what follows
# '#'; slurm.conf does the same and reads quotes and backslashes; the
# HealthCheckProgram wrapper is a shell script, so anything beyond a plain
# set of characters is refused too. Every such value comes through here.
checked_path() { # what value
  local v=$2 bad
  case $v in
    /*) ;;
    *) die "$1 '$v' is not an absolute path: give one such as /opt/slurm";;
  esac
  [[ $v == *[[:cntrl:]]* ]] && die "$1 must not contain control characters (a newline ends a Slurm config line)"
  [[ $v == *[[:space:]]* ]] && die "$1 '$v' holds whitespace, where plugstack.conf and slurm.conf split a line: use a path without it"
  [[ $v == *'#'* ]] && die "$1 '$v' holds '#', where plugstack.conf and slurm.conf start a comment: use a path without it"
  [[ $v == *[\"\'\\]* ]] && die "$1 '$v' holds a quote or backslash, which slurm.conf reads as quoting: use a path without it"
  bad=${v//[A-Za-z0-9._\/+:@%=-]/}
  [ -z "$bad" ] || die "$1 '$v' holds '${bad:0:1}': use a path of letters, digits and . _ - + : @ % = / only (it goes into Slurm's config and a shell script)"
  [[ $v == */../* || $v == */.. || $v == */./* || $v == */. ]] && die "$1 '$v' must not contain . or .. parts"
  [ "$v" = / ] && { printf '/'; return; }
  printf '%s' "${v%/}"
}

# The rule the prolog applies to its config (core/src/trust.rs, sshd's
# StrictModes): the object and every directory above it owned by root and
# writable by nobody else; an ancestor may be a sticky directory like /tmp; a
# symlink is judged by where it leads. Empty when trusted, else why not.
untrusted_why() { # path
  local p=$1 real dir meta
  real=$(readlink -f -- "$p") || { echo "$p does not resolve"; return; }
  [ -e "$real" ] || { echo "$p does not exist"; return; }
  [ "$real" = "$p" ] || p="$p (symlink to $real)"
  dir=$real
  while :; do
    meta=$(stat -c '%u %a %F' -- "$dir") || { echo "cannot stat $dir"; return; }
    set -- $meta
    if [ "$1" != 0 ]; then echo "$dir is owned by uid $1, not root: chown root $dir"; return; fi
    local mode=$((8#$2))
    if [ $((mode & 8#022)) != 0 ] && { [ "$dir" = "$real" ] || [ $((mode & 8#1000)) = 0 ]; }; then
      echo "$dir is writable by group or others (mode $2): chmod go-w $dir"; return
    fi
    [ "$dir" = / ] && break
    dir=$(dirname -- "$dir")
  done
}

# Refuse, in one line, a file or directory root should not act on.
require_trusted() { # what path
  local why; why=$(untrusted_why "$2")
  [ -z "$why" ] || die "refusing $1 $2: $why (root acts only on files only root can change)"
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
# controller does not answer within 5 s (install before slurmctld runs) or
# the key is unset, which scontrol prints as "(null)" (PlugStackConfig when
# slurm.conf leaves it to the default, plugstack.conf beside slurm.conf).
show_config_value() {
  awk -v k="$1" '$1 == k && $2 == "=" { sub(/^[^=]*= */, ""); if ($0 != "(null)") print; exit }' <<<"$SHOW_CONFIG"
}

# This machine's Debian multiarch directory name (x86_64-linux-gnu,
# aarch64-linux-gnu), asked of dpkg or gcc, else made from uname -m.
multiarch() {
  local m
  m=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null) ||
    m=$(gcc -print-multiarch 2>/dev/null) || m=
  [ -n "$m" ] || m=$(uname -m)-linux-gnu
  printf '%s' "$m"
}

# PluginDir= in slurm.conf (the first of a colon list), as slurmd reads it.
conf_plugin_dir() {
  [ -f "$sysconfdir/slurm.conf" ] || return 0
  awk 'BEGIN { IGNORECASE = 1 } { sub(/#.*/, "") }
    tolower($1) ~ /^plugindir=/ { v = substr($1, 11); gsub(/"/, "", v) } END { print v }' "$sysconfdir/slurm.conf" | cut -d: -f1
}

# PluginDir from the machine: what the controller reports, else slurm.conf's
# PluginDir, else the directory of the prefix's layout that holds Slurm's
# auth plugins: lib64/slurm (RHEL, slurm.spec), lib/slurm (a source build),
# lib/<multiarch>/slurm or slurm-wlm (SchedMD's or Debian's packages).
learn_plugin_dir() {
  [ -n "$plugin_dir" ] && return
  plugin_dir=$(show_config_value PluginDir); plugin_dir=${plugin_dir%%:*}
  [ -n "$plugin_dir" ] || plugin_dir=$(conf_plugin_dir)
  if [ -z "$plugin_dir" ]; then
    local d ma; ma=$(multiarch)
    for d in "$slurm_prefix/lib64/slurm" "$slurm_prefix/lib/slurm" "$slurm_prefix/lib/$ma/slurm" "$slurm_prefix/lib/$ma/slurm-wlm"; do
      compgen -G "$d/auth_*.so" >/dev/null && { plugin_dir=$d; break; }
    done
  fi
  [ -n "$plugin_dir" ] || die "no Slurm PluginDir under $slurm_prefix (no auth_*.so in lib64/slurm, lib/slurm or lib/$(multiarch)/slurm): give --plugin-dir"
  plugin_dir=$(checked_path "Slurm's PluginDir" "$plugin_dir")
}

learn_layout() {
  if [ -z "$sysconfdir" ]; then
    local conf; conf=$(show_config_value SLURM_CONF)
    if [ -n "$conf" ]; then sysconfdir=$(dirname "$conf")
    # Installed in /usr (slurm.spec's RPMs): sysconfdir /etc/slurm.
    elif [ "$slurm_prefix" = /usr ]; then sysconfdir=/etc/slurm
    else sysconfdir=$slurm_prefix/etc; fi
    sysconfdir=$(checked_path "Slurm's config directory" "$sysconfdir")
  fi
  [ -d "$sysconfdir" ] || die "Slurm's config directory $sysconfdir does not exist: give --sysconfdir"
  learn_plugin_dir
  [ -d "$plugin_dir" ] || die "PluginDir $plugin_dir is not a directory: give --plugin-dir"
  plugstack=$(show_config_value PlugStackConfig | grep . || echo "$sysconfdir/plugstack.conf")
  plugstack=$(checked_path "PlugStackConfig" "$plugstack")
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
  for b in slurm-imex-prolog slurm-imex-epilog slurm-imex-watch; do put 0755 "$PAYLOAD/bin/$b" "$prefix/sbin/$b"; done
  put 0755 "$PAYLOAD/bin/slurm-imex" "$prefix/bin/slurm-imex"
  put 0644 "$PAYLOAD/plugins/$mm/spank_imex.so" "$plugin_dir/spank_imex.so"
  write_file 0755 "$prefix/sbin/slurm-imex-healthcheck" <<EOF
#!/bin/sh
# slurm.conf HealthCheckProgram (Slurm runs it without arguments), written by
# slurm-imex install.sh: drains the node with an "imex-health:" reason on a
# drain-class finding; resumes it when healthy only if we drained it.
exec $prefix/bin/slurm-imex --config $sysconfdir/imex.toml check --drain --undrain
EOF
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

# plugstack.conf ($plugstack; on login and compute nodes):
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

# The files --uninstall removes: every absolute path the manifest lists, each
# a regular file (or missing) in directories only root can change; the first
# that is not is refused before anything is removed.
manifest_files() { # manifest
  local f
  while IFS= read -r f; do
    case $f in /*) ;; *) continue;; esac
    [ -e "$f" ] || [ -L "$f" ] || continue
    [ -f "$f" ] && [ ! -L "$f" ] || die "refusing to uninstall: $f (listed in $1) is not a regular file; remove it yourself if it is ours"
    require_trusted "to remove" "$f"
    printf '%s\n' "$f"
  done < "$1"
}

do_uninstall() {
  local dir=$prefix/share/slurm-imex manifest files f
  manifest=$dir/installed-files
  [ -e "$manifest" ] || die "nothing to uninstall: $manifest is missing"
  require_trusted "the manifest directory" "$dir"
  require_trusted "the manifest" "$manifest"
  if [ -z "$sysconfdir" ] && [ -f "$dir/sysconfdir" ]; then
    require_trusted "the recorded config directory" "$dir/sysconfdir"
    sysconfdir=$(checked_path "the recorded config directory" "$(head -n 1 "$dir/sysconfdir")")
  fi
  files=$(manifest_files "$manifest") || exit 1
  if [ -n "$sysconfdir" ]; then
    local lines; lines=$(imex_slurm_lines "$sysconfdir")
    if [ -n "$lines" ]; then
      echo "install.sh: refusing to uninstall while Slurm's configuration names slurm-imex (slurmd would run programs that are gone): remove these lines, restart slurmctld and slurmd, then run --uninstall again:" >&2
      printf '%s\n' "$lines" | sed 's/^/  /' >&2
      exit 1
    fi
  else
    echo "install.sh: no recorded config directory: check that slurm.conf and plugstack.conf no longer name slurm-imex (give --sysconfdir to have it checked)" >&2
  fi
  if [ "$dry_run" = 1 ]; then
    echo "would take $(imex_ports_shipped "$PAYLOAD/conf-examples/sysctl.d/90-slurm-imex.conf") out of the reserved ports"
    [ -z "$files" ] || sed 's/^/would remove /' <<<"$files"
    return
  fi
  imex_ports_release "$(imex_ports_shipped "$PAYLOAD/conf-examples/sysctl.d/90-slurm-imex.conf")"
  [ -z "$files" ] || while IFS= read -r f; do rm -f -- "$f"; done <<<"$files"
  rm -f "$manifest" "$dir/sysconfdir"; rmdir "$dir" 2>/dev/null || true
  echo "removed slurm-imex (imex.toml is kept)"
}

# The manifest's directory, before anything is written into it: it and what
# exists above it only root can change.
check_manifest_dir() {
  local d=$prefix/share/slurm-imex
  while [ ! -e "$d" ]; do d=$(dirname "$d"); done
  require_trusted "the manifest directory" "$d"
  [ ! -e "$MANIFEST" ] || require_trusted "the manifest" "$MANIFEST"
}

# --- BEGIN maintainer-lib.sh ---
# The kernel takes a comma-separated list of ports and ranges (a-b). The
# sysctl.d file the package ships holds our span; a file of the same name in
# /etc/sysctl.d masks it with the site's ranges plus ours, so that a boot
# applies the union and never only ours.
IMEX_PORTS_KEY=net.ipv4.ip_local_reserved_ports
IMEX_PORTS_FILE=90-slurm-imex.conf

# Union ("+") or difference ("-") of two port lists, normalised (sorted,
# merged, "a-b" or "a"); empty for none. Ports outside 1..65535 are dropped.
imex_ports_op() { # op list list
  awk -v op="$1" -v a="$2" -v b="$3" '
    BEGIN {
      list[1] = a; val[1] = 1; list[2] = b; val[2] = (op == "+") ? 1 : 0
      for (l = 1; l <= 2; l++) {
        n = split(list[l], p, ",")
        for (i = 1; i <= n; i++) {
          gsub(/[ \t]/, "", p[i])
          if (p[i] ~ /^[0-9]+$/) { lo = p[i] + 0; hi = lo }
          else if (p[i] ~ /^[0-9]+-[0-9]+$/) { split(p[i], x, "-"); lo = x[1] + 0; hi = x[2] + 0 }
          else continue
          if (lo < 1) lo = 1
          if (hi > 65535) hi = 65535
          for (; lo <= hi; lo++) port[lo] = val[l]
        }
      }
      out = ""; start = 0
      for (i = 1; i <= 65536; i++) {
        on = (i <= 65535 && port[i] == 1)
        if (on && !start) start = i
        if (!on && start) {
          out = out (out == "" ? "" : ",") (start == i - 1 ? start : start "-" (i - 1))
          start = 0
        }
      }
      print out
    }'
}

# The value the site's sysctl configuration gives the key, without our file:
# the last assignment in the order systemd-sysctl and `sysctl --system` apply
# files (by name across /etc, /run, /usr/local/lib, /usr/lib and /lib
# sysctl.d, the first directory winning a name; /etc/sysctl.conf last).
imex_ports_site() {
  local d f
  for d in /etc/sysctl.d /run/sysctl.d /usr/local/lib/sysctl.d /usr/lib/sysctl.d /lib/sysctl.d; do
    for f in "$d"/*.conf; do
      if [ -f "$f" ]; then printf '%s\t%s\n' "${f##*/}" "$f"; fi
    done
  done | LC_ALL=C sort -s -t "$(printf '\t')" -k1,1 | awk -F '\t' -v ours="$IMEX_PORTS_FILE" \
      '$1 != ours && !seen[$1]++ { print $2 }' | {
    while IFS= read -r f; do cat "$f" 2>/dev/null || true; echo; done
    if [ -f /etc/sysctl.conf ]; then cat /etc/sysctl.conf 2>/dev/null || true; fi
  } | awk -v key="$IMEX_PORTS_KEY" '
    { sub(/^[ \t]+/, ""); sub(/^-/, "") }
    /^[#;]/ { next }
    {
      i = index($0, "="); if (i == 0) next
      k = substr($0, 1, i - 1); v = substr($0, i + 1)
      gsub(/[ \t]/, "", k); gsub(/\//, ".", k); gsub(/^[ \t]+|[ \t]+$/, "", v)
      if (k == key) val = v
    }
    END { print val }'
}

# Whether this is the running system rather than a chroot or an image being
# built, where a sysctl would change the build host: our root is PID 1's (the
# test systemd-detect-virt --chroot and Debian's ischroot make). No /proc: an
# image build. PID 1's root unreadable (a container whose PID 1 is not ours
# to inspect): the kernel settings we reach are this container's own.
imex_ports_live() {
  local root one
  [ -e /proc/1 ] || return 1
  root=$(stat -L -c %d:%i / 2>/dev/null) || return 1
  one=$(stat -L -c %d:%i /proc/1/root/ 2>/dev/null) || return 0
  [ "$root" = "$one" ]
}

# Set the live value when it changes; one line on failure.
imex_ports_apply() { # new-list
  local cur
  cur=$(cat /proc/sys/net/ipv4/ip_local_reserved_ports 2>/dev/null) || return 0
  [ "$(imex_ports_op + "$cur" "")" = "$1" ] && return 0
  printf '%s\n' "$1" > /proc/sys/net/ipv4/ip_local_reserved_ports 2>/dev/null ||
    echo "slurm-imex: could not set $IMEX_PORTS_KEY to '$1' now; it applies at boot (sysctl --system)" >&2
}

# Reserve OURS: /etc/sysctl.d/90-slurm-imex.conf holds the site's ranges plus
# ours, and the live value gains ours (unless in a chroot or image build).
imex_ports_reserve() { # ours
  local site all cur
  [ -n "$1" ] || { echo "slurm-imex: no port span to reserve (the shipped sysctl.d file is missing)" >&2; return 0; }
  site=$(imex_ports_site)
  all=$(imex_ports_op + "$site" "$1")
  mkdir -p /etc/sysctl.d
  cat > "/etc/sysctl.d/$IMEX_PORTS_FILE.new" <<EOF
# Written by slurm-imex: the per-job IMEX SERVER_PORT span ($1) added to the
# ranges the rest of your sysctl configuration reserves (${site:-none}), so
# that a boot applies both. This masks /usr/lib/sysctl.d/$IMEX_PORTS_FILE. After changing
# your own ranges, reinstall slurm-imex (or edit this line). Removing slurm-imex removes
# this file and takes only our span out of the live value.
$IMEX_PORTS_KEY = $all
EOF
  mv -f "/etc/sysctl.d/$IMEX_PORTS_FILE.new" "/etc/sysctl.d/$IMEX_PORTS_FILE"
  if imex_ports_live; then
    cur=$(cat /proc/sys/net/ipv4/ip_local_reserved_ports 2>/dev/null) || return 0
    imex_ports_apply "$(imex_ports_op + "$cur" "$1")"
  else
    echo "slurm-imex: in a chroot or image build: $IMEX_PORTS_KEY not changed now; /etc/sysctl.d/$IMEX_PORTS_FILE applies at boot"
  fi
}

# Release OURS: the live value loses the ports we added and nothing the
# site's configuration reserves; our /etc/sysctl.d file goes.
imex_ports_release() { # ours
  local site cur
  rm -f "/etc/sysctl.d/$IMEX_PORTS_FILE" "/etc/sysctl.d/$IMEX_PORTS_FILE.new"
  imex_ports_live || return 0
  site=$(imex_ports_site)
  cur=$(cat /proc/sys/net/ipv4/ip_local_reserved_ports 2>/dev/null) || return 0
  imex_ports_apply "$(imex_ports_op - "$cur" "$(imex_ports_op - "$1" "$site")")"
}

# Our span as the shipped sysctl.d file gives it.
imex_ports_shipped() { # file
  sed -n 's/^[ \t]*net\.ipv4\.ip_local_reserved_ports[ \t]*=[ \t]*//p' "$1" | tail -n 1
}

# The lines of Slurm's configuration in DIR (slurm.conf, plugstack.conf and
# plugstack.conf.d) that still name slurm-imex, as "file:line: text"; none
# when nothing does. Comments (from #) are not read, as Slurm does not.
imex_slurm_lines() { # sysconfdir
  local f
  for f in "$1/slurm.conf" "$1/plugstack.conf" "$1"/plugstack.conf.d/*.conf; do
    if [ -f "$f" ]; then
      awk -v f="$f" '{ t = $0; sub(/#.*/, "", t) }
        t ~ /spank_imex|slurm-imex-(prolog|epilog|healthcheck)/ { print f ":" NR ": " $0 }' "$f" 2>/dev/null || true
    fi
  done
}

# Before removing anything Slurm runs: the lines to take out first.
imex_warn_slurm_lines() { # sysconfdir
  local lines
  lines=$(imex_slurm_lines "$1")
  [ -n "$lines" ] || return 0
  echo "slurm-imex: Slurm's configuration still names slurm-imex; remove these lines and restart slurmctld and slurmd, or jobs fail and nodes drain when the programs are gone:" >&2
  printf '%s\n' "$lines" | sed 's/^/  /' >&2
}

# After installing or upgrading: the installed CLI loads imex.toml as the
# prolog, epilog and health check will (`slurm-imex config`). A file it
# refuses is said as a warning with its line (file:line: key), and the
# install goes on: the fixed file may come after the package, and until then
# the node's hooks fail and drain it (docs/install.md, "A bad key in
# imex.toml").
imex_config_warn() { # cli config
  local out
  [ -x "$1" ] && [ -e "$2" ] || return 0
  if ! out=$("$1" --config "$2" config 2>&1 >/dev/null); then
    out=$(printf '%s' "$out" | sed -n 1p)
    echo "slurm-imex: warning: ${out#slurm-imex: } (every prolog and epilog on this node fails, and Slurm drains it, until the file loads: fix it, then run slurm-imex config)" >&2
  fi
  return 0
}
# --- END maintainer-lib.sh ---

# The tarball's CPU (its CPU file, written by scripts/release.sh) must be
# this machine's: an aarch64 Grace tray needs the aarch64-linux tarball.
check_cpu() {
  local want have
  [ -f "$PAYLOAD/CPU" ] || return 0
  want=$(cat "$PAYLOAD/CPU"); have=$(uname -m)
  [ "$want" = "$have" ] ||
    die "this tarball is for $want CPUs, and this machine is $have: use slurm-imex-$(cat "$PAYLOAD/VERSION")-$have-linux.tar.gz"
}

main() {
  parse_args "$@"
  [ "$(id -u)" = 0 ] || [ "$dry_run" = 1 ] || die "run as root (it writes under $prefix and into Slurm's PluginDir)"
  if [ "$uninstall" = 1 ]; then do_uninstall; return; fi
  [ -x "$PAYLOAD/bin/slurm-imex-prolog" ] && [ -d "$PAYLOAD/plugins" ] ||
    die "run me from an unpacked release tarball (scripts/release.sh makes one)"
  check_cpu
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
  check_manifest_dir
  echo "slurm-imex $(cat "$PAYLOAD/VERSION") for Slurm $version ($slurm_prefix): PluginDir $plugin_dir, config $sysconfdir"
  [ "$dry_run" = 1 ] || { mkdir -p "$(dirname "$MANIFEST")"; : > "$MANIFEST.new"; }
  install_files "$mm"
  local ours; ours=$(imex_ports_shipped "$PAYLOAD/conf-examples/sysctl.d/90-slurm-imex.conf")
  if [ "$dry_run" = 0 ]; then
    printf '%s\n' "$sysconfdir" > "$(dirname "$MANIFEST")/sysconfdir"
    echo "$MANIFEST" >> "$MANIFEST.new"
    mv -f "$MANIFEST.new" "$MANIFEST"
    imex_ports_reserve "$ours"
    imex_config_warn "$prefix/bin/slurm-imex" "$sysconfdir/imex.toml"
  else
    echo "would add $ours to the reserved ports (/etc/sysctl.d/90-slurm-imex.conf)"
  fi
  print_site_lines
}
main "$@"
