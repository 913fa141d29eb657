#!/bin/bash
# Every shell file we ship or test with (the maintainer scripts, install.sh,
# the healthcheck, the scripts, the tests, the benches, .ci/run):
#  * shellcheck at severity warning, clean, and each disable says why on its
#    line (`# shellcheck disable=SC2086 # a list of names, split on purpose`);
#  * no pipeline whose reader stops reading early (`| head`, `| grep -q`, ...),
#    which under `set -e -o pipefail` fails at random (tests/lint/sigpipe.py);
#    the RPM spec's scriptlets are read for that too.
# A shell file is a tracked file named *.sh, or one whose first line is a
# sh/bash shebang or a `# shellcheck shell=` directive.
#   bash tests/lint/shell.sh        # prints "shell lint: N files ..."; exit 1 naming each finding
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v shellcheck >/dev/null || { echo "shell lint: shellcheck is missing: apt-get install shellcheck (scripts/install-deps.sh does)" >&2; exit 1; }

is_shell() { # file
  case $1 in *.sh) return 0;; esac
  local first=""
  IFS= read -r first < "$1" 2>/dev/null || true
  [[ $first =~ ^\#!.*/(env\ +)?(ba)?sh([[:space:]]|$) ]] || [[ $first == "# shellcheck shell="* ]]
}

files=()
while IFS= read -r f; do
  [ -f "$f" ] && is_shell "$f" && files+=("$f")
done < <(git ls-files 2>/dev/null || find . -path ./target -prune -o -type f -print | sed 's#^\./##')
[ ${#files[@]} -gt 0 ] || { echo "shell lint: no shell files found (run it from a checkout)" >&2; exit 1; }

rc=0
python3 tests/lint/sigpipe.py --self-test || rc=1
python3 tests/lint/sigpipe.py "${files[@]}" packaging/rpm/slurm-imex.spec || rc=1
shellcheck --severity=warning --format=gcc "${files[@]}" || rc=1
# Each disable says why, on its line: "# shellcheck disable=SCnnnn # why".
if grep -nHE '^[[:space:]]*# shellcheck .*disable=' "${files[@]}" | grep -vE 'disable=[A-Z0-9,]+ # .'; then
  echo "shell lint: each shellcheck disable above gives no reason on its line (add '# why' after it)" >&2; rc=1
fi
[ $rc = 0 ] || { echo "shell lint: FAILED (each finding above names its file and line)" >&2; exit 1; }
echo "shell lint: ${#files[@]} files: shellcheck --severity=warning clean, every disable with its reason, no pipeline reader that stops early"
