"""nbgrader's submit with a clear message when a disk is full (the student's home or the class's exchange).

nbgrader copies the submission into the exchange, then a second copy into the student's home (its cache);
either copy can meet a full disk, and nbgrader then shows a long shutil.Error. This says in one line what
happened, whether the teacher has the submission, and what to do; a copy the exchange could not finish is
removed, so the teacher never collects half a submission. Configured for students by deploy/classroom.py
(`c.ExchangeFactory.submit`); imported by nbgrader only.
"""
import errno
import os
import shutil

from nbgrader.exchange.default.submit import ExchangeSubmit

FULL = (errno.ENOSPC, errno.EDQUOT)
ARRIVED = ("提交已经送到课程的交换目录，老师收得到这一份；但你的主目录满了（磁盘空间不足），本机的提交记录没能写下，"
           "面板上可能看不到它。请删掉主目录里不需要的大文件，再提交一次确认。")
NOT_ARRIVED = ("提交没有完成：课程的交换目录满了（磁盘空间不足），这一份没有送到老师那里，半截的副本已经删掉。"
               "这不是你的笔记本的问题：请告诉老师；你的笔记本还在你自己的目录里，稍后再提交。")


def disk_full(exc):
    """Whether `exc` (an OSError, or shutil.Error listing the files a copytree could not copy) is a full disk."""
    if isinstance(exc, shutil.Error):
        return any(any(f"[Errno {n}]" in str(why) for n in FULL) for *_, why in (exc.args[0] if exc.args else []))
    return isinstance(exc, OSError) and exc.errno in FULL


class ClearSubmit(ExchangeSubmit):
    def copy_files(self):
        dest = os.path.join(self.inbound_path, self.assignment_filename) if self.inbound_path else None
        try:
            super().copy_files()
        except OSError as exc:  # shutil.Error included
            if not disk_full(exc) or dest is None:
                raise
            arrived = os.path.isfile(os.path.join(dest, "submission_secret.txt"))
            if not arrived:
                shutil.rmtree(dest, ignore_errors=True)
            self.fail(ARRIVED if arrived else NOT_ARRIVED)
