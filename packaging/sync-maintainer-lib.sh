#!/bin/bash
# Copies packaging/maintainer-lib.sh (between its BEGIN and END lines) into
# every script that holds a copy: the Debian maintainer scripts and
# scripts/install.sh (the RPM spec %includes the file itself). A package's
# scripts cannot source a file the package ships when it is being removed,
# hence copies.
#   packaging/sync-maintainer-lib.sh          # rewrite the copies
#   packaging/sync-maintainer-lib.sh --check  # exit 1 naming each stale copy
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
lib=$REPO/packaging/maintainer-lib.sh
copies=("$REPO/packaging/debian/postinst" "$REPO/packaging/debian/prerm" "$REPO/scripts/install.sh")
block() { sed -n '/^# --- BEGIN maintainer-lib.sh ---$/,/^# --- END maintainer-lib.sh ---$/p' "$1"; }
want=$(block "$lib")
stale=0
for f in "${copies[@]}"; do
  [ "$(block "$f")" = "$want" ] && continue
  if [ "${1:-}" = --check ]; then
    echo "$f: its copy of packaging/maintainer-lib.sh differs: run packaging/sync-maintainer-lib.sh" >&2
    stale=1; continue
  fi
  grep -q '^# --- BEGIN maintainer-lib.sh ---$' "$f" || { echo "$f has no BEGIN maintainer-lib.sh line" >&2; exit 1; }
  awk -v libfile="$lib" '
    /^# --- BEGIN maintainer-lib.sh ---$/ {
      while ((getline l < libfile) > 0) { if (l ~ /^# --- BEGIN/) on = 1; if (on) print l; if (l ~ /^# --- END/) on = 0 }
      skip = 1; next }
    skip && /^# --- END maintainer-lib.sh ---$/ { skip = 0; next }
    !skip { print }' "$f" > "$f.new"
  chmod --reference="$f" "$f.new"; mv "$f.new" "$f"
  echo "updated $f"
done
exit $stale
