"""The numbers of the class report, from `class_data.ClassData`: pure functions, no I/O.

Per exercise: mean, share with full marks and with 0, difficulty (mean / max), discrimination (the
corrected item–total correlation: the exercise's score against the rest of the student's automatic
total), the share that passed the public check but lost hidden points, and the named mistakes with
the students who made each. A failure no known bug explains is "未识别"; an answer left as the
release's stub is "未作答".
"""
import math
import statistics
from collections import Counter
from dataclasses import dataclass, field

UNANSWERED = "未作答"
UNRECOGNISED = "未识别"


@dataclass
class Mistake:
    key: str | None
    text: str
    students: list = field(default_factory=list)


@dataclass
class ExerciseStats:
    grade_id: str
    notebook: str
    points: float
    students: int
    mean: float | None
    full_share: float | None
    zero_share: float | None
    difficulty: float | None
    discrimination: float | None
    public_only_share: float | None
    public_only: list
    mistakes: list          # [Mistake], most common first
    unanswered: list
    unrecognised: list


def spread(values):
    """(median, first quartile, third quartile) of a list, or None when empty."""
    if not values:
        return None
    values = sorted(values)
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, med, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return med, q1, q3


def correlation(xs, ys):
    """Pearson's r, or None where it is undefined (fewer than 3 students, or no spread)."""
    if len(xs) < 3:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def auto_total(data, student):
    return data.totals.get(student, (0.0, 0.0, 0.0, 0.0))[0]


def exercise_score(data, student, ex):
    return data.scores.get((student, ex.public[0]), 0.0) + data.scores.get((student, ex.hidden[0]), 0.0)


def _normalised(source):
    return "\n".join(line.rstrip() for line in (source or "").strip().splitlines())


def diagnosis(data, student, ex):
    """[(key, text, stage, check)] the verdicts named for one student's exercise that lost points: the
    mistakes of the first failing check, and known bugs (keyed) a later one names besides (the same mistake
    met again, in other words, counts once); else 未作答 (the release's stub) or 未识别."""
    found, seen = [], set()
    for cell_id, check in ((ex.public[0], "公开"), (ex.hidden[0], "隐藏")):
        for rec in data.verdicts.get((student, cell_id), []):
            if rec.get("passed") or rec.get("grade_id") != ex.grade_id:
                continue
            later = bool(found)
            for item in rec.get("mistakes") or []:
                if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], str)):
                    continue
                key = item[0] if isinstance(item[0], str) else None
                if item[1] not in seen and not (later and key is None):
                    seen.add(item[1])
                    found.append((key, item[1], rec.get("stage") if isinstance(rec.get("stage"), str) else "", check))
    if found:
        return found
    answer = data.answers.get(ex.grade_id, {}).get(student)
    if answer is None or _normalised(answer) == _normalised(data.stubs.get(ex.grade_id)):
        return [(None, UNANSWERED, "", "")]
    return [(None, UNRECOGNISED, "", "")]


def exercise_stats(data, ex):
    who = [s for s in data.students if ex.notebook in data.submitted[s]]
    scores = [exercise_score(data, s, ex) for s in who]
    n = len(who)
    rest = [auto_total(data, s) - sc for s, sc in zip(who, scores)]
    public_only = [s for s in who if data.scores.get((s, ex.public[0]), 0.0) >= ex.public[1] > 0
                   and data.scores.get((s, ex.hidden[0]), 0.0) < ex.hidden[1]]
    mistakes, unanswered, unrecognised = {}, [], []
    for s, sc in zip(who, scores):
        if sc >= ex.points:
            continue
        for key, text, _, _ in diagnosis(data, s, ex):
            if text == UNANSWERED:
                unanswered.append(s)
            elif text == UNRECOGNISED:
                unrecognised.append(s)
            else:
                mistakes.setdefault(text, Mistake(key, text)).students.append(s)
    ranked = sorted(mistakes.values(), key=lambda m: (-len(m.students), m.text))
    mean = statistics.fmean(scores) if scores else None
    return ExerciseStats(
        grade_id=ex.grade_id, notebook=ex.notebook, points=ex.points, students=n, mean=mean,
        full_share=sum(sc >= ex.points for sc in scores) / n if n else None,
        zero_share=sum(sc == 0 for sc in scores) / n if n else None,
        difficulty=mean / ex.points if n and ex.points else None,
        discrimination=correlation(scores, rest), public_only_share=len(public_only) / n if n else None,
        public_only=public_only, mistakes=ranked, unanswered=unanswered, unrecognised=unrecognised)


def all_exercise_stats(data):
    return [exercise_stats(data, ex) for ex in data.exercises]


def notebook_scores(data, name):
    """{student: automatic points in notebook `name`} of the students who submitted it."""
    cells = [c for ex in data.exercises if ex.notebook == name for c in (ex.public[0], ex.hidden[0])]
    return {s: sum(data.scores.get((s, c), 0.0) for c in cells) for s in data.students if name in data.submitted[s]}


def notebook_points(data, name):
    return sum(ex.points for ex in data.exercises if ex.notebook == name)


@dataclass
class WrittenQuestion:
    notebook: str
    grade_id: str
    points: float
    graded: int
    waiting: int
    scores: Counter


def written_answers(data):
    """Per §C question: how many are graded, how many still wait, and the graded scores."""
    out = {}
    for _student, notebook, gid, score, points, needs, _ in data.manual:
        q = out.setdefault((notebook, gid), WrittenQuestion(notebook, gid, float(points), 0, 0, Counter()))
        if needs == "yes" or score == "":
            q.waiting += 1
        else:
            q.graded += 1
            q.scores[float(score)] += 1
    return list(out.values())


def note_counts(data):
    """[(note text, number of students)] across the class, most common first."""
    counts = Counter()
    for student in data.students:
        for text in set(data.notes.get(student, [])):
            counts[text] += 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def diagnosis_rows(data):
    """Rows of diagnoses.csv: one per student, exercise that lost points, and mistake."""
    rows = []
    for ex in data.exercises:
        for s in data.students:
            if ex.notebook not in data.submitted[s]:
                continue
            lost = ex.points - exercise_score(data, s, ex)
            if lost <= 0:
                continue
            for key, text, stage, check in diagnosis(data, s, ex):
                rows.append([s, ex.notebook, ex.grade_id, check, stage, key or "", text, f"{lost:g}"])
    return rows
