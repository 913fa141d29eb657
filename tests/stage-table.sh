#!/bin/bash
# The stage table tests/run-all.sh ends with: each stage's wall time beside
# its budget on a fresh machine, read from the "Stage budgets" table of
# docs/development.md, and a warning (never a failure) naming each stage
# past its budget.
#   bash tests/stage-table.sh DOC "name|seconds"...
# A stage's budget is the table's row of its name; an e2e phase's
# ("e2e 24.11 amd64 base (package)") is the row of its phase ("e2e base",
# or "e2e arm64 base" under emulation); a background build's
# ("background: Slurm 25.11 build") the row of its kind ("background: Slurm
# build"). Hand-read: the doc's rows are "| `name` | N s | why |".
set -uo pipefail
doc=$1; shift

# name -> budget in seconds, from the doc's table.
declare -A BUDGET
while IFS='|' read -r _ name budget _; do
  name=$(sed 's/^ *`//; s/` *$//' <<<"$name")
  budget=$(sed -n 's/^ *\([0-9][0-9]*\) s *$/\1/p' <<<"$budget")
  [ -n "$name" ] && [ -n "$budget" ] && BUDGET[$name]=$budget
done < <(sed -n '/^### Stage budgets/,/^##/p' "$doc" | grep '^| `')

budget_of() { # stage name
  local name=$1 key
  for key in "$name" \
    "$(sed -n 's/^e2e [0-9.]* \(arm64\) \([a-z0-9-]*\).*/e2e \1 \2/p' <<<"$name")" \
    "$(sed -n 's/^e2e [0-9.]* [a-z0-9]* \([a-z0-9-]*\).*/e2e \1/p' <<<"$name")" \
    "$(sed -n 's/^background: Slurm [0-9.]*\( [a-z]*\)\{0,1\} build$/background: Slurm build/p' <<<"$name")"; do
    [ -n "$key" ] && [ -n "${BUDGET[$key]:-}" ] && { echo "${BUDGET[$key]}"; return; }
  done
}

over=()
echo
echo "| stage | wall | budget (fresh machine) | |"
echo "|---|---|---|---|"
for row in "$@"; do
  name=${row%|*}; wall=${row##*|}
  budget=$(budget_of "$name")
  flag=
  if [ -z "$budget" ]; then flag="no budget in $doc"
  elif [ "$wall" -gt "$budget" ]; then flag="OVER BUDGET"; over+=("$name ($wall s, budget $budget s)")
  fi
  printf '| %s | %s s | %s | %s |\n' "$name" "$wall" "${budget:+$budget s}" "$flag"
done
if [ ${#over[@]} -gt 0 ]; then
  echo "stage-table: warning: ${#over[@]} stage(s) past their budget on a fresh machine: ${over[*]}"
fi
