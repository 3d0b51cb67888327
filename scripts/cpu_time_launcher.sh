#!/bin/sh
# A compiler launcher that logs each object's compile CPU time (user+system seconds, which load on a
# shared machine does not inflate as it does wall time):
#   cmake --preset release -DCMAKE_CXX_COMPILER_LAUNCHER=$PWD/scripts/cpu_time_launcher.sh
#   OAR_CPU_LOG=/tmp/cpu.log cmake --build --preset release --target oar_tests_layers -j1
# Each line of $OAR_CPU_LOG (default build-cpu-time.log in the build folder) is "<seconds> <object>";
# sum a stage with awk '{s+=$1} END {print s}'.
log="${OAR_CPU_LOG:-build-cpu-time.log}"
obj="?"
prev=""
for a in "$@"; do
  if [ "$prev" = "-o" ]; then obj="$a"; fi
  prev="$a"
done
tf="$(mktemp)"
rc=0
/usr/bin/time -o "$tf" -f '%U %S' "$@" || rc=$?
awk -v o="$obj" 'END {printf "%.2f %s\n", $1 + $2, o}' "$tf" >> "$log"
rm -f "$tf"
exit "$rc"
