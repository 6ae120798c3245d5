#!/usr/bin/env bash
# What including each public header costs a user's file: its preprocessed lines (`-E | wc -l`)
# and the CPU seconds of `-fsyntax-only` (the median of --reps runs) of a file that includes only it.
# docs/design.md, "Compile time", has the figures and what they led to.
#
#   bench/compile_cost.sh [--reps N] [--max-lines N] [HEADER...]
#
# HEADER: a path under include/ (remat/remat.hpp); none = the public headers listed below.
# Environment: CXX (default c++), CXXFLAGS (added to every command: where the optional parts'
# dependencies are, e.g. "$(pkg-config --cflags cbc) -I/usr/include/lpsolve"). A header whose
# dependencies are missing is reported as such. CMake runs it with the build's compiler and flags:
# `cmake --build BUILD --target compile_cost`.
# --max-lines N: counts lines only, and exits 1 if a header has more than N (the ctest
# compile_cost.umbrella_lines keeps remat/remat.hpp under its ceiling this way).
set -u

reps=3
max_lines=
headers=()
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) reps="$2"; shift 2 ;;
    --max-lines) max_lines="$2"; shift 2 ;;
    -h | --help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "compile_cost.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) headers+=("$1"); shift ;;
  esac
done
if [ ${#headers[@]} -eq 0 ]; then
  headers=(remat/remat.hpp remat/exec.hpp remat/problem/graph.hpp remat/sim/simulate.hpp
           remat/policy/store_all.hpp remat/policy/periodic.hpp remat/policy/revolve.hpp
           remat/policy/rotor.hpp remat/policy/rotor_floating.hpp remat/policy/offload.hpp
           remat/policy/checkmate.hpp remat/policy/rockmate.hpp remat/milp/model.hpp
           remat/milp/lpsolve.hpp remat/milp/cbc.hpp remat/io/json.hpp remat/io/graph_json.hpp remat/io/trace.hpp
           remat/io/svg.hpp remat/io/file.hpp remat/sweep_result.hpp remat/sweep.hpp
           remat/zoo/gpt2.hpp)
fi

cxx=${CXX:-c++}
include_dir="$(cd "$(dirname "$0")/../include" && pwd)"
# CXXFLAGS is a list of flags: split on spaces on purpose.
# shellcheck disable=SC2206
flags=(-std=c++20 -I"$include_dir" ${CXXFLAGS:-} -x c++ -)

lines_of() { printf '#include <%s>\n' "$1" | "$cxx" "${flags[@]}" -E -o - 2>/dev/null | wc -l; }

# CPU seconds (user + system, 3 decimals) of one -fsyntax-only run: steadier than wall time on a
# shared machine. Bash's own `time`, no external timer.
seconds_of() {
  local TIMEFORMAT='%3U %3S' t
  t=$( { time printf '#include <%s>\n' "$1" | "$cxx" "${flags[@]}" -fsyntax-only 2>/dev/null; } 2>&1) || return 1
  awk -v t="$t" 'BEGIN { split(t, f, " "); printf "%.3f", f[1] + f[2] }'
}

status=0
[ -z "$max_lines" ] && printf '%-34s %10s %9s   (%s; CPU seconds, median of %d)\n' header lines seconds "$cxx" "$reps"
for h in "${headers[@]}"; do
  if ! printf '#include <%s>\n' "$h" | "$cxx" "${flags[@]}" -E -o /dev/null 2>/dev/null; then
    printf '%-34s %10s\n' "$h" "n/a: does not preprocess here (its dependency missing from CXXFLAGS?)"
    [ -n "$max_lines" ] && status=1
    continue
  fi
  n=$(lines_of "$h")
  if [ -n "$max_lines" ]; then
    if [ "$n" -gt "$max_lines" ]; then
      echo "compile_cost: <$h> preprocesses to $n lines, over the ceiling of $max_lines:" \
           "a header it includes, or a new include, made every user's file heavier" \
           "(docs/design.md, \"Compile time\"; bench/compile_cost.sh shows each header's share)"
      status=1
    else
      echo "compile_cost: <$h> preprocesses to $n lines (ceiling $max_lines)"
    fi
    continue
  fi
  times=()
  for ((r = 0; r < reps; ++r)); do
    t=$(seconds_of "$h") || { t=; break; }
    times+=("$t")
  done
  if [ ${#times[@]} -eq 0 ]; then
    printf '%-34s %10s %9s\n' "$h" "$n" "n/a: does not compile here"
    continue
  fi
  median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
  printf '%-34s %10s %9s\n' "$h" "$n" "$median"
done
exit $status
