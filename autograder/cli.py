"""Command line: `python -m autograder grade|release ...`."""
import argparse
import sys


def build_parser():
    p = argparse.ArgumentParser(prog="python -m autograder", description="W1D1 课程的评分与发布工具")
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grade", help="给全班评分：每个学生一个子文件夹")
    g.add_argument("submissions", help="提交文件夹（每个学生一个子文件夹，文件夹名即学号）")
    g.add_argument("--out", required=True, help="输出文件夹：grades.csv、feedback/、nbgrader/")
    g.add_argument("--jobs", type=int, default=1, help="并行评分的学生数")
    g.add_argument("--timeout", type=int, default=120, help="每个单元格的时间上限（秒）")
    g.add_argument("--seed", type=int, default=None, help="检查用例的随机种子（默认每次随机）")
    g.add_argument("--force", action="store_true", help="重新评分所有学生（默认只评新的或提交有变化的学生）")
    g.add_argument("--students", default="", help="只重新评分这些学生，逗号分隔，例如 alice,bob")
    g.add_argument("--no-sandbox", action="store_true", help="不用沙箱（危险：学生代码可读取答案与成绩库）")
    rp = sub.add_parser("report", help="重新生成全班报告 report.html（和三个 CSV），不重新评分")
    rp.add_argument("run", nargs="?", default=None, help="评分命令的输出文件夹（--out 的那个）")
    rp.add_argument("--course", default=None, help="改为读 nbgrader 课程文件夹（hub 上用 nbgrader autograde 评的分）")
    rp.add_argument("--out", default=None, help="和 --course 一起用：报告写到这里")
    r = sub.add_parser("release", help="从 solutions/ 重新生成 notebooks/（nbgrader generate_assignment）")
    r.add_argument("--to", default=None, help="写到别的文件夹（默认 notebooks/）")
    s = sub.add_parser("student-package", help="构建学生安装的 wheel（不含答案）到 dist/")
    s.add_argument("--out", default="dist", help="输出文件夹（默认 dist/）")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.command == "grade":
        from autograder.command.grade import main as grade_main

        return grade_main(args)
    if args.command == "report":
        from autograder.report.class_report import main as report_main

        if not args.run and not args.course:
            print("错误：给出评分输出文件夹，或者 --course DIR --out DIR", file=sys.stderr)
            return 2
        return report_main(args)
    if args.command == "release":
        from autograder.release import release

        return release(args.to)
    if args.command == "student-package":
        from autograder.student_package import main as package_main

        return package_main(args.out)
    return 2


if __name__ == "__main__":
    sys.exit(main())
