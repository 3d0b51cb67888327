#!/bin/sh
# Runs a program that must refuse: passes only when it exits with the given status AND its output
# (stdout and stderr) has a line matching the extended regular expression:
#   run_expect_refusal.sh <status> <regex> <program> [args...]
status=$1
regex=$2
shift 2
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" -ne "$status" ]; then
  echo "run_expect_refusal: $1 exited with status $rc, expected $status" >&2
  exit 1
fi
if ! grep -Eq -- "$regex" "$out"; then
  echo "run_expect_refusal: no line of $1's output matches: $regex" >&2
  exit 1
fi
exit 0
