#!/usr/bin/env bash
# The instructor's day, end to end, with nbgrader's own exchange in a local folder:
# release -> two students fetch and submit -> collect -> grade -> feedback -> export.
# Usage: tools/instructor_day.sh [WORK_DIR]   (run from anywhere; uses the repo's .venv)
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${1:-$(mktemp -d)}"
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
BIN="$REPO/.venv/bin"
PLAIN_PATH="$PATH"   # what a fresh shell has: the venv is not on it
export PATH="$BIN:$PATH"
EX="$WORK/exchange"; mkdir -p "$EX"
COURSE=w1d1-attention
cd "$REPO"

echo "== 1. release notebooks/w1d1 (kept in sync with solutions/ by \`make release\`) to the exchange"
nbgrader release_assignment w1d1 --Exchange.root="$EX" --db="sqlite:///$WORK/release-gradebook.db" --force --quiet

echo "== 2. students fetch, work and submit"
for student in alice bob; do
  home="$WORK/home/$student"; mkdir -p "$home"
  (cd "$home" && nbgrader fetch_assignment w1d1 --course="$COURSE" --Exchange.root="$EX" --quiet)
done
cp "$REPO/data/demo_class/alice/01_self_attention.ipynb" "$WORK/home/alice/w1d1/01_self_attention.ipynb"
for student in alice bob; do
  (cd "$WORK/home/$student" && nbgrader submit w1d1 --course="$COURSE" --Exchange.root="$EX" --CourseDirectory.student_id=$student --quiet)
done

echo "== 3. collect"
nbgrader collect w1d1 --Exchange.root="$EX" --db="sqlite:///$WORK/release-gradebook.db" \
  --CourseDirectory.submitted_directory="$WORK/submitted" --quiet

echo "== 4. grade the class (sandboxed, parallel)"
python -m autograder grade "$WORK/submitted" --out "$WORK/grading" --jobs 2

echo "== 5. one student's feedback"
ls "$WORK/grading/feedback/alice/"

echo "== 6. export (nbgrader's CSV of this grading run)"
PATH="$PLAIN_PATH" make -s -C "$REPO" export OUT="$WORK/grading"
echo "per test cell: $WORK/grading/grades.csv"
echo "nbgrader totals: $WORK/grading/nbgrader_grades.csv"
