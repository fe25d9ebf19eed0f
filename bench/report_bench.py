"""The class report for a synthetic class of N students (default 300): the time to compute and write
report.html and its three CSV files from data already read (what a grading run adds after grading).
Scores and named mistakes are random; the answers compared for similarity are bench/similarity_bench.py's
(the mutation tables' correct styles with half their lines rewritten: harsher than a real class).

`python bench/report_bench.py [N]` prints the measured seconds; `make bench` runs it too.
"""
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.course import available_notebooks  # noqa: E402
from autograder.report import class_data, class_report, similarity  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from similarity_bench import synthetic_class as synthetic_answers  # noqa: E402

MISTAKES = [("scale_none", "缺少缩放：分数要除以 √d_k。"), ("merge_no_transpose", "合并时漏了 transpose"),
            ("bwd_noD", "softmax 的反向少了减去 D"), (None, "形状广播不了")]


def synthetic_class(n, seed=0):
    """ClassData of n students who submitted every notebook, with random scores, verdicts and answers."""
    rng = random.Random(seed)
    notebooks = available_notebooks()
    records = {f"student{i:03d}": {"notebooks": notebooks, "broken": {}, "ok": True, "notes": []} for i in range(n)}
    tables = {"grades.csv": (None, []), "manual_grades.csv": (None, []), "totals.csv": (None, [])}
    data = class_data.from_tables(tables, records, notebooks)
    data.max_total = 101.0
    for s in data.students:
        total = 0.0
        for ex in data.exercises:
            for cell, points in (ex.public, ex.hidden):
                score = points if rng.random() < 0.7 else 0.0
                data.scores[(s, cell)] = score
                total += score
                if score < points:
                    key, text = rng.choice(MISTAKES)
                    data.verdicts[(s, cell)] = [{"grade_id": ex.grade_id, "passed": False, "stage": "用例 1",
                                                 "mistakes": [[key, text]]}]
        data.totals[s] = (total, 0.0, 0.0, total)
        data.notes[s] = ["改了名的文件：按发布时的文件名评分"] if rng.random() < 0.1 else []
    answers, _ = synthetic_answers(n, seed)  # the long answers (mha, the backward, the forward), in varied styles
    data.answers = {gid: {f"student{int(k[1:]):03d}": src for k, src in by.items()} for gid, by in answers.items()}
    return data


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    data = synthetic_class(n)
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        class_report.write(tmp, data)
        seconds = time.perf_counter() - t
        size = (Path(tmp) / "report.html").stat().st_size
    print(f"全班报告：{n} 名合成学生（{len(data.exercises)} 道题，其中 {len(data.answers)} 道比较相似度）"
          f"{seconds:.1f} s，report.html {size / 1e6:.1f} MB")
    # one student's cell of many small definitions (a red team's attempt to stall the report): linear cost
    flood = "class B:\n    pass\n" + "".join(f"v{i} = {i}\n" for i in range(8000))
    t = time.perf_counter()
    similarity.with_helpers({"mha": "class A(B):\n    pass\n", "split_merge_heads": flood})
    print(f"  一个单元格 8000 个定义（{len(flood) // 1000} kB）的辅助定义查找：{time.perf_counter() - t:.2f} s")
    return seconds


if __name__ == "__main__":
    main()
