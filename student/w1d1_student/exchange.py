"""nbgrader's submit with a clear message when a disk is full (the student's home or the class's exchange), and
a notebook over the size limit submitted without its outputs.

nbgrader copies the submission into the exchange, then a second copy into the student's home (its cache);
either copy can meet a full disk, and nbgrader then shows a long shutil.Error. This says in one line what
happened, whether the teacher has the submission, and what to do; a copy the exchange could not finish is
removed, so the teacher never collects half a submission. nbgrader leaves a file over
`CourseDirectory.max_file_size` out with only a log line: a notebook over it goes in without its saved outputs
(lean_notebook.py; outputs are never graded), and the student is told so in one line; one still over it without
them is not submitted at all, and the student is told why. Configured for students by deploy/classroom.py
(`c.ExchangeFactory.submit`); imported by nbgrader only.
"""
import errno
import os
import shutil

from nbgrader.exchange.default.submit import ExchangeSubmit
from nbgrader.utils import ignore_patterns

from .lean_notebook import TooBig, size_text, without_outputs

FULL = (errno.ENOSPC, errno.EDQUOT)
ARRIVED = ("提交已经送到课程的交换目录，老师收得到这一份；但你的主目录满了（磁盘空间不足），本机的提交记录没能写下，"
           "面板上可能看不到它。请删掉主目录里不需要的大文件，再提交一次确认。")
NOT_ARRIVED = ("提交没有完成：课程的交换目录满了（磁盘空间不足），这一份没有送到老师那里，半截的副本已经删掉。"
               "这不是你的笔记本的问题：请告诉老师；你的笔记本还在你自己的目录里，稍后再提交。")


LEAN = ("提交已经送到老师那里，但 {names}超过了 {limit} 的上限，交上去的是删掉了保存的输出的版本（评分不看输出，"
        "代码和答案都在）；你自己的笔记本没有改动。")
TOO_BIG = "提交没有完成：{name} 有 {size}，{why}。这一份没有送到老师那里；删掉不需要的大段内容后再提交（你的笔记本还在你自己的目录里）。"


def lean_notebooks(src, limit, exclude=None, include=None):
    """{path under src: (its size, its text without outputs)} of the notebooks in `src` over `limit` bytes that
    nbgrader would copy but for their size (lean_notebook.py); raises TooBig naming one still over it."""
    skip = ignore_patterns(exclude=exclude, include=include)
    found = {}
    for folder, dirs, files in os.walk(src):
        ignored = set(skip(folder, dirs + files))
        dirs[:] = [d for d in dirs if d not in ignored]
        for name in files:
            path = os.path.join(folder, name)
            if name in ignored or not name.endswith(".ipynb") or os.path.islink(path):
                continue
            size = os.path.getsize(path)
            if size > limit:
                rel = os.path.relpath(path, src)
                try:
                    with open(path, "rb") as fh:
                        found[rel] = (size, without_outputs(fh, limit))
                except TooBig as exc:
                    raise TooBig(TOO_BIG.format(name=f"`{rel}`", size=size_text(size), why=exc)) from None
    return found


def disk_full(exc):
    """Whether `exc` (an OSError, or shutil.Error listing the files a copytree could not copy) is a full disk."""
    if isinstance(exc, shutil.Error):
        return any(any(f"[Errno {n}]" in str(why) for n in FULL) for *_, why in (exc.args[0] if exc.args else []))
    return isinstance(exc, OSError) and exc.errno in FULL


class ClearSubmit(ExchangeSubmit):
    _lean = {}  # lean_notebooks() of this submission

    def copy_files(self):
        dest = os.path.join(self.inbound_path, self.assignment_filename) if self.inbound_path else None
        limit = 1000 * self.coursedir.max_file_size
        try:
            self._lean = lean_notebooks(self.src_path, limit, self.coursedir.ignore, self.coursedir.include)
        except TooBig as exc:
            self.fail(str(exc))
        try:
            super().copy_files()
        except OSError as exc:  # shutil.Error included
            if not disk_full(exc) or dest is None:
                raise
            arrived = os.path.isfile(os.path.join(dest, "submission_secret.txt"))
            if not arrived:
                shutil.rmtree(dest, ignore_errors=True)
            self.fail(ARRIVED if arrived else NOT_ARRIVED)
        if self._lean:
            self.fail(LEAN.format(names="、".join(f"`{rel}`（{size_text(size)}）" for rel, (size, _) in self._lean.items()),
                                  limit=size_text(limit)))

    def get_size(self, path):
        """nbgrader's size of the submission: a notebook over the limit counts as what goes in of it."""
        return super().get_size(path) - sum(size - len(lean) for size, lean in self._lean.values())

    def do_copy(self, src, dest, log=None):
        """nbgrader's copy (which leaves a file over the limit out), then the notebooks over it without outputs."""
        super().do_copy(src, dest, log)
        for rel, (_, lean) in self._lean.items():
            with open(os.path.join(dest, rel), "wb") as fh:
                fh.write(lean)
