"""The class report of a grading run: report.html, diagnoses.csv, exercise_stats.csv, similarity.csv.

`write(folder, data)` renders them from one `class_data.ClassData`; a grading run calls it inside the
generation it is about to publish (so report and grades never disagree), and
`python -m autograder report OUT` rebuilds them from an existing run without regrading (after hand
grading in formgrader, say). `--course DIR` reads an nbgrader course folder graded by nbgrader
itself (the hub's path) and writes the report where `--out` says.
"""
import sys
from pathlib import Path

from autograder.course import ASSIGNMENT
from autograder.outdir import write_text
from autograder.report import class_data, class_stats, grade_tables, report_page, similarity

FILES = ("report.html", "diagnoses.csv", "exercise_stats.csv", "similarity.csv")
DIAGNOSES_HEADER = ["student_id", "notebook", "grade_id", "check", "stage", "mistake", "description", "points_lost"]
STATS_HEADER = ["notebook", "grade_id", "max_score", "students", "mean", "full_share", "zero_share", "difficulty",
                "discrimination", "public_pass_hidden_lost_share", "most_common_mistake"]
SIMILARITY_HEADER = ["grade_id", "kind", "a", "b", "score", "reason"]


def _fmt(x):
    return "" if x is None else f"{x:.4g}"


# answers that converge whoever writes them, so a high score says nothing (measured on the demo class:
# two honest central-difference loops score above the threshold)
CONVERGENT = {"numerical_gradient": "中心差分梯度几乎只有一种写法（逐元素 +ε、−ε、恢复），诚实的答案彼此都很像"}


def compare_answers(data):
    """Each answer, with what it uses from the student's other answer cells of its notebook, compared."""
    expanded = {}
    for name in data.notebooks:
        gids = [ex.grade_id for ex in data.exercises if ex.notebook == name]
        for student in data.students:
            cells = {gid: data.answers[gid][student] for gid in gids if student in data.answers.get(gid, {})}
            for gid, src in similarity.with_helpers(cells).items():
                expanded.setdefault(gid, {})[student] = src
    answers = {gid: by_student for gid, by_student in expanded.items() if gid not in CONVERGENT}
    comparison = similarity.compare(answers, data.stubs, data.references)
    comparison.skipped.update({gid: why for gid, why in CONVERGENT.items() if gid in data.answers})
    return comparison


def tables(data, stats, comparison):
    """{file name: (header, rows)} of the three CSV files, every text cell neutralised for spreadsheets."""
    def safe_row(row):
        return [grade_tables.csv_safe(class_data.safe(v)) for v in row]

    stat_rows = [[s.notebook, s.grade_id, f"{s.points:g}", s.students, _fmt(s.mean), _fmt(s.full_share),
                  _fmt(s.zero_share), _fmt(s.difficulty), _fmt(s.discrimination), _fmt(s.public_only_share),
                  s.mistakes[0].text if s.mistakes else ""] for s in stats]
    return {"diagnoses.csv": (DIAGNOSES_HEADER, [safe_row(r) for r in class_stats.diagnosis_rows(data)]),
            "exercise_stats.csv": (STATS_HEADER, [safe_row(r) for r in stat_rows]),
            "similarity.csv": (SIMILARITY_HEADER, [safe_row(r) for r in comparison.rows()])}


def write(folder, data):
    """Write the four files into `folder`; returns the exercise statistics."""
    stats = class_stats.all_exercise_stats(data)
    comparison = compare_answers(data)
    for name, (header, rows) in tables(data, stats, comparison).items():
        write_text(Path(folder) / name, grade_tables.render(header, rows))
    write_text(Path(folder) / "report.html", report_page.render(data, stats, comparison))
    return stats


def for_run(gen, gb, records, notebooks, skipped=None):
    """The report of a run of the grading command, written into its generation `gen`."""
    def page(student, notebook):
        return Path(gen) / "feedback" / student / f"{notebook}.html"

    data = class_data.read(gb, Path(gen) / "nbgrader", records, notebooks, report_dir=gen, feedback_pages=page)
    data.skipped = {class_data.safe(k): class_data.safe(v) for k, v in (skipped or {}).items()}
    return write(gen, data)


def for_course(course, out):
    """The report of an nbgrader course folder graded by nbgrader itself (the hub), written into `out`."""
    from nbgrader.api import Gradebook

    course, out = Path(course), Path(out)
    if not (course / "gradebook.db").is_file():
        raise FileNotFoundError(f"{course} 里没有 gradebook.db：先用 nbgrader autograde 评分")
    out.mkdir(parents=True, exist_ok=True)

    def page(student, notebook):
        return course / "feedback" / student / ASSIGNMENT / f"{notebook}.html"

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        data = class_data.read(gb, course, None, report_dir=out, feedback_pages=page)
    return write(out, data)


def rebuild(out):
    """`python -m autograder report OUT`: the report of the run published in OUT, from its gradebook."""
    from nbgrader.api import Gradebook

    from autograder.notes import from_data
    from autograder.outdir import OutFolder, read_state

    if not Path(out).is_dir():
        raise FileNotFoundError(f"找不到评分结果文件夹：{out}")
    output = OutFolder(out)
    gen = output.previous()
    if gen is None or gen == output.out:
        raise FileNotFoundError(f"{out} 里没有评分结果：先运行 python -m autograder grade … --out {out}")
    output.lock()
    try:
        state = read_state(gen)
        records = {sid: {**rec, "notes": from_data(rec.get("notes"))} for sid, rec in state.get("students", {}).items()}
        with Gradebook(f"sqlite:///{gen / 'nbgrader' / 'gradebook.db'}") as gb:
            stats = for_run(gen, gb, records, None, state.get("skipped"))
        output.link_published()
    finally:
        output.unlock()
    return stats


def main(args):
    try:
        if args.course:
            if not args.out:
                print("错误：--course 需要 --out（报告写到哪里）", file=sys.stderr)
                return 2
            for_course(args.course, args.out)
            where = Path(args.out)
        else:
            rebuild(args.run)
            where = Path(args.run)
    except (OSError, RuntimeError) as exc:  # a missing folder, no gradebook, another run holding OUT
        print(f"错误：{exc}", file=sys.stderr)
        return 2
    print(f"写入 {where / 'report.html'}、diagnoses.csv、exercise_stats.csv、similarity.csv")
    return 0
