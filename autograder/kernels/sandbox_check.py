"""The start-up check of the sandbox (both paths, before any notebook is graded): a kernel's python starts in the
sandbox that grading uses, as the kernel's uid, and finds the folders and modules a kernel needs. A failure names
its real cause and what to do (SandboxUnavailable), never a guess.
"""
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from autograder.errors import SandboxUnavailable
from autograder.kernels import bwrap, kernel_view
from autograder.kernels.limits import Limits

# what the checked python does: is each folder it needs there for its uid, does each module a kernel imports before
# the first cell resolve; a JSON list of what is missing goes to stdout, or to the file argv[2]
CHECK = """import importlib.util, json, os, sys
paths, modules = json.loads(sys.argv[1])
missing = [p for p in paths if not os.access(p, os.R_OK | os.X_OK)]
for name in modules:
    try:
        found = importlib.util.find_spec(name) is not None
    except Exception:
        found = False
    if not found:
        missing.append(name)
if len(sys.argv) > 2:
    open(sys.argv[2], "w").write(json.dumps(missing))
else:
    print(json.dumps(missing))
"""
MODULES = sorted({m.split(".")[0] for m in ("ipykernel_launcher", "w1d1_student.registry", *kernel_view.AHEAD_IMPORTS)})
NO_NAMESPACES = ("namespace", "uid map", "Operation not permitted", "setting up uid", "unshare")
TIMEOUT = 120


def _needed():
    roots, links = kernel_view.python_layout()
    return [*roots, *(path for path, _ in links), os.path.abspath(sys.executable)], MODULES


def _closed_to_others(path):
    """The first folder or file on the way to `path` (from the sandbox folder that holds it) that another uid
    cannot pass or read, or None: the sandbox shows the folders above its own as 0755, nothing below."""
    real = os.path.realpath(path)
    root = next((r for r in kernel_view.python_layout()[0] if kernel_view._under(real, r)), None)
    if root is None or not os.path.exists(real):
        return None
    steps = [root, *(str(p) for p in reversed(Path(real).parents) if kernel_view._under(str(p), root) and str(p) != root)]
    for step in dict.fromkeys([*steps, real]):
        mode = os.stat(step).st_mode
        if not mode & (0o001 if os.path.isdir(step) else 0o004):
            return step
    return None


def _unreadable(path):
    closed = _closed_to_others(path)
    if closed is None:
        return None
    return (f"{path}：{closed} 只有属主能{'进入' if os.path.isdir(closed) else '读'}（{oct(os.stat(closed).st_mode & 0o777)}），"
            "而沙箱里的内核以自己的 uid 运行", f"chmod -R a+rX {closed}")


def _advice_for(missing, kernel):
    """(cause, what to do) for what `kernel` could not see in the sandbox: its folders first (a module in a folder
    it cannot see is missing for that reason), else its modules."""
    lines, advice = [], []
    for path in (m for m in missing if m.startswith("/")):
        closed = _unreadable(path)
        if closed:
            lines.append(closed[0])
            advice.append(closed[1])
        else:
            lines.append(f"{path}（本机上{'有' if os.path.exists(path) else '也没有'}，沙箱没有把它放进去）")
            advice.append("这是评分程序的沙箱布局缺陷，请把这个原因报告给课程维护者")
    for name in [] if lines else missing:
        try:
            spec = importlib.util.find_spec(name)
        except Exception:
            spec = None
        where = f"（评分进程从 {spec.origin} 导入，它不在评分用的 Python 环境里）" if spec and spec.origin else ""
        lines.append(f"模块 {name}{where}")
        advice.append("在课程文件夹里运行 make venv（学生包以 wheel 装进虚拟环境；可编辑安装或 PYTHONPATH 在沙箱里看不到）")
    return f"沙箱里{kernel}看不到：" + "；".join(lines), "；".join(dict.fromkeys(advice))


def _refusal(kernel, stderr, returncode, missing, needed):
    """SandboxUnavailable for a check that failed in `kernel`: its real cause first."""
    if missing:
        return SandboxUnavailable(*_advice_for(missing, kernel))
    text = stderr.strip()[-800:] or f"退出状态 {returncode}，没有输出"
    closed = next(filter(None, map(_unreadable, needed[0])), None)
    if closed:  # the python or a folder it needs: the uid a kernel runs as cannot read it
        return SandboxUnavailable(f"沙箱里{kernel}不能运行：{closed[0]}（{text.splitlines()[-1]}）", closed[1])
    failed_exec = re.search(r"(?:setpriv: failed to execute|bwrap: execvp) (\S+?):", text)
    if failed_exec:
        roots = "、".join(kernel_view.python_layout()[0])
        return SandboxUnavailable(f"沙箱里{kernel}找不到评分用的 python {failed_exec.group(1)}（{text}）",
                                  f"沙箱挂载的是 {roots}：这是评分程序的沙箱布局缺陷，请把这个原因报告给课程维护者")
    if text.startswith("bwrap:") and any(word in text for word in NO_NAMESPACES):
        return SandboxUnavailable(f"bubblewrap 无法创建沙箱：{text}",
                                  "本机（或容器）不允许创建命名空间：以 root 评分，容器以 --privileged 运行，"
                                  "或打开非特权用户命名空间（sysctl -w kernel.unprivileged_userns_clone=1）")
    return SandboxUnavailable(f"沙箱里{kernel}没有正常运行：{text}")


def _fresh(needed, limits):
    """The check in a sandbox as a freshly started kernel gets (bwrap.bwrap_command, its uid, the launcher)."""
    inbox = Path(tempfile.mkdtemp(prefix="w1d1in-"))
    try:
        kernel_view.fill_inbox(None, inbox)
        cmd = bwrap.bwrap_command([sys.executable, "-c", CHECK, json.dumps(needed)], bwrap.Folders(inbox), limits)
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, cwd=inbox)
    finally:
        shutil.rmtree(inbox, ignore_errors=True)
    try:
        missing = json.loads(out.stdout) if out.returncode == 0 else None
    except ValueError:
        missing = None
    if missing is None or missing:
        raise _refusal("新启动的内核", out.stderr, out.returncode, missing, needed)


def try_kernel(limits=None):
    """Raise SandboxUnavailable (the real cause, what to do) unless a kernel can start here, in the sandbox every
    graded kernel gets."""
    limits = limits or Limits(cpu_seconds=30)
    try:
        needed = _needed()
        _fresh(needed, limits)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(f"沙箱检查没有完成：{type(exc).__name__}: {exc}") from exc


@functools.lru_cache(maxsize=None)
def checked():
    """try_kernel() once per process: None, or the SandboxUnavailable it raised."""
    try:
        try_kernel()
    except SandboxUnavailable as exc:
        return exc
    return None
