#!/bin/bash
# Every shell file we ship or test with (the maintainer scripts, install.sh,
# the healthcheck, the scripts, the tests, the benches, .ci/run):
#  * shellcheck at severity warning, clean, and each disable says why on its
#    line (`# shellcheck disable=SC2086 # a list of names, split on purpose`);
#  * no pipeline whose reader stops reading early (`| head`, `| grep -q`, ...),
#    which under `set -e -o pipefail` fails at random (tests/lint/sigpipe.py);
#    the RPM spec's scriptlets are read for that too;
#  * every e2e test_* function is listed in a phase (tests/e2e/listed.sh).
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

# (safe.directory: root may lint a checkout another user owns, as with sudo)
tracked=$(git -c safe.directory="$PWD" ls-files) || { echo "shell lint: git ls-files failed: run it from a git checkout" >&2; exit 1; }
files=()
while IFS= read -r f; do
  [ -f "$f" ] && is_shell "$f" && files+=("$f")
done <<<"$tracked"
[ ${#files[@]} -gt 0 ] || { echo "shell lint: no shell files found (run it from a checkout)" >&2; exit 1; }

rc=0
python3 tests/lint/sigpipe.py --self-test || rc=1
python3 tests/lint/sigpipe.py "${files[@]}" packaging/rpm/slurm-imex.spec || rc=1
shellcheck --severity=warning --format=gcc "${files[@]}" || rc=1
# Each disable says why, on its line: "# shellcheck disable=SCnnnn # why".
if grep -nHE '^[[:space:]]*#[[:space:]]*shellcheck .*disable=' "${files[@]}" | grep -vE 'disable=[A-Za-z0-9,]+ +# .'; then
  echo "shell lint: each shellcheck disable above gives no reason on its line (add '# why' after it)" >&2; rc=1
fi
# Every e2e test runs somewhere (tests/e2e/listed.sh; versions.sh checks it too).
listed=$(REPO=$PWD bash -c 'source tests/e2e/assert.sh && source tests/e2e/listed.sh && test_every_e2e_test_is_listed_in_a_phase; [ "$CURRENT_OK" = 1 ]') || rc=1
echo "${listed#"${listed%%[![:space:]]*}"}"
[ $rc = 0 ] || { echo "shell lint: FAILED (each finding above names its file and line)" >&2; exit 1; }
echo "shell lint: ${#files[@]} files: shellcheck --severity=warning clean, every disable with its reason, no pipeline reader that stops early"
