#!/usr/bin/env bash
# Fails when a C++ or CUDA source of the project is not formatted as .clang-format says (Google
# base, 100 columns, includes in groups), naming the files. `bash scripts/check_format.sh --fix`
# formats them in place. CI runs the check (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "check_format: clang-format is not installed (Debian: apt-get install clang-format)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.hpp' '*.cpp' '*.cu' '*.h')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: ${#bad[@]} file(s) not formatted (bash scripts/check_format.sh --fix):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
