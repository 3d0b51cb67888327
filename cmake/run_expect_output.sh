#!/bin/sh
# Runs a program and passes only when it exits 0 AND its output (stdout and stderr) has a line
# matching the extended regular expression:  run_expect_output.sh <regex> <program> [args...]
# (ctest's PASS_REGULAR_EXPRESSION alone ignores the exit status: a sanitizer report or a crash
# after the expected line would pass.)
regex=$1
shift
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" -ne 0 ]; then
  echo "run_expect_output: $1 exited with status $rc" >&2
  exit 1
fi
if ! grep -Eq -- "$regex" "$out"; then
  echo "run_expect_output: no line of $1's output matches: $regex" >&2
  exit 1
fi
exit 0
