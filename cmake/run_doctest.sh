#!/bin/sh
# Runs the test cases of one source file of a folder's doctest executable (tests/CMakeLists.txt):
#   run_doctest.sh <executable> <doctest filters...>     e.g. --source-file=*/tests/core/test_shape.cpp
# doctest exits 0 when its filters select no test case, which would pass a renamed or emptied file;
# here that is a failure. Otherwise the executable's own exit status is the outcome: 0 passed,
# 77 skipped (an oar_test::skip with its reason and no failed check, tests/main.cpp), else failed.
exe=$1
shift
count=$("$exe" --count --no-colors=true "$@" 2>&1 |
  sed -n 's/.*unskipped test cases passing the current filters: *\([0-9][0-9]*\).*/\1/p')
if [ -z "$count" ] || [ "$count" -eq 0 ]; then
  echo "run_doctest: no test case of $exe matches $*; failing rather than passing with nothing run" >&2
  exit 1
fi
exec "$exe" "$@"
