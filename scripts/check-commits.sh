#!/usr/bin/env bash
# Checks the subjects of the commits since the habit was set (the first commit of the
# workspace lints): at most 72 characters, prefixed by one of the areas below. Merge commits
# are git's own and are left out. Needs the history (CI clones the whole repository).
set -euo pipefail
cd "$(dirname "$0")/.."
since=9071aff
areas='server|store|cache|device|runtime|bench|crash|cli|tests|docs|build|ci|scripts'
if ! git cat-file -e "$since^{commit}" 2>/dev/null; then
  echo "check-commits: $since is not in this clone's history; nothing to check"
  exit 0
fi
bad=0
while IFS= read -r subject; do
  if [ "${#subject}" -gt 72 ]; then
    echo "too long (${#subject} > 72): $subject"
    bad=1
  fi
  if ! [[ "$subject" =~ ^($areas):\  ]]; then
    echo "no area prefix ($areas): $subject"
    bad=1
  fi
done < <(git log --no-merges --format=%s "$since^..HEAD")
if [ "$bad" -ne 0 ]; then
  exit 1
fi
echo "check-commits: every subject since $since is ≤ 72 characters with an area prefix"
