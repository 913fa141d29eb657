# shellcheck shell=bash
# Every e2e test runs somewhere. A test is a function test_* in a feature
# file; it runs only where a phase lists it (phases.sh) or a package-test
# list names it (run_package_test in versions.sh, arm64.sh and
# tests/packaging/rpm.sh). One defined and listed nowhere would never run,
# however green the run: versions.sh fails on it first, naming it.
# (tests/packaging/run.sh runs every test_* it defines on its own.)

# "file name" of every test defined in the feature and package-test files,
# in any of bash's forms: `test_x() {`, `function test_x {`, `function
# test_x()`, indented, the brace on the next line. (The files are read, not
# sourced: run.sh and versions.sh run the suite when sourced.)
e2e_tests_defined() {
  local f
  for f in "$REPO"/tests/e2e/*.sh "$REPO"/tests/packaging/rpm.sh; do
    sed -nE -e "s#^[[:space:]]*function[[:space:]]+(test_[A-Za-z0-9_]+)[[:space:]]*(\(\))?[[:space:]]*(\{.*)?\$#${f#"$REPO"/} \1#p" \
      -e "s#^[[:space:]]*(test_[A-Za-z0-9_]+)[[:space:]]*\(\)[[:space:]]*(\{.*)?\$#${f#"$REPO"/} \1#p" "$f"
  done
}

# Every test some phase (under every way of installing) or list runs.
e2e_tests_listed() {
  (
    # shellcheck source=phases.sh
    source "$REPO/tests/e2e/phases.sh"
    local install phase
    for install in target package prefix rpm; do
      for phase in $PHASES; do
        E2E_INSTALL=$install phase_tests "$phase"
        E2E_INSTALL=$install phase_tests_after_down "$phase"
      done
    done
  )
  # (comment lines are no listing)
  sed -n '/^[[:space:]]*#/d; s/.*run_package_test  *\(test_[A-Za-z0-9_]*\).*/\1/p' \
    "$REPO"/tests/e2e/*.sh "$REPO"/tests/packaging/rpm.sh
}

# The defined tests that nothing runs, one "file name" line each.
e2e_tests_unlisted() {
  local listed
  listed=" $(e2e_tests_listed | tr -s ' \n' '  ') "
  e2e_tests_defined | while read -r file name; do
    [[ $listed == *" $name "* ]] || echo "$file $name"
  done
}

test_every_e2e_test_is_listed_in_a_phase() {
  local file name n=0 defined
  defined=$(e2e_tests_defined | wc -l)
  [ "$defined" -gt 0 ] || { fail "no e2e test_* function found in tests/e2e: the search itself is broken"; return; }
  while read -r file name; do
    fail "$file defines $name, which no phase runs: list it in tests/e2e/phases.sh (or in versions.sh's package tests)"
    n=$((n + 1))
  done < <(e2e_tests_unlisted)
  echo "    $defined tests defined, $n listed nowhere"
}
