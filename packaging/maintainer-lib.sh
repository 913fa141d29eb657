# shellcheck shell=sh disable=SC3043 # local: Debian policy 10.4 allows it in /bin/sh; dash and RHEL's sh (bash) have it
# maintainer-lib.sh: what installing and removing slurm-imex does to the
# system beyond its own files, the same in every way it is installed:
#  * the per-job IMEX port span in net.ipv4.ip_local_reserved_ports, added to
#    the site's own ranges and taken out again without touching them
#    (docs/install.md, "The port reservation");
#  * the slurm.conf and plugstack lines that still name slurm-imex, said
#    before anything Slurm runs is removed.
# POSIX sh (dash, bash; `local` as Debian policy allows), awk and coreutils.
# The Debian maintainer scripts (packaging/debian/postinst, prerm), the RPM
# scriptlets (packaging/rpm/slurm-imex.spec) and scripts/install.sh hold it
# verbatim between the BEGIN and END lines: packaging/sync-maintainer-lib.sh
# writes the copies, and its --check (run by tests/packaging/run.sh)
# fails when one differs.
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
