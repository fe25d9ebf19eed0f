"""nbgrader preprocessors: confined execution that survives bad cells, and verdicts from probe data.

Configured in nbgrader_config.py, so `nbgrader autograde` in this repo grades exactly like
`python -m autograder grade`.
"""
import json
import time

from jupyter_core.utils import ensure_async, run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Integer
from w1d1_format import MIME, OWN_KEY, VERDICTS_KEY
from w1d1_student import registry, wire
from w1d1_student.cell_scope import grading_cells
from w1d1_student.cell_source import check_calls

from autograder import timing
from autograder.exercises import CARRIES
from autograder.exercises.checks import judge_payload
from autograder.kernels import sandbox_check
from autograder.kernels.kernel_manager import SandboxKernelManager
from autograder.static import forbidden_calls, provenance

VERDICT_ENAME = "检查未通过"
CASES_KEY = "w1d1_case_file"  # resources: the case file the kernel's cases came from, for JudgeProbes
ARRIVED_KEY = "w1d1_probes"  # resources: {cell index: every check result the kernel sent while it ran}, for JudgeProbes


def _error_output(title, message):
    return NotebookNode(output_type="error", ename=title, evalue=message, traceback=[f"{title}: {message}"])


def _stream(text):
    return NotebookNode(output_type="stream", name="stdout", text=text)


def _is_test(cell):
    return cell.get("cell_type") == "code" and utils.is_grade(cell) and not utils.is_solution(cell)


def withheld(nb, index):
    """{grade_id: the exercises it would hand over} for the hidden checks of test cell `index` whose cases hold
    answers (CARRIES) to an exercise with a test cell still to run after it (a cell moved up): those cases are
    not sent, so no answer reaches the kernel before that exercise's own checks have run."""
    later = {gid for cell in nb.cells[index + 1:] if _is_test(cell) for gid, _ in check_calls(cell.source)}
    out = {}
    for grade_id, hidden in check_calls(nb.cells[index].source) if _is_test(nb.cells[index]) else []:
        pending = [gid for gid in CARRIES.get(grade_id, ()) if gid in later]
        if hidden and pending:
            out[grade_id] = pending
    return out


def withheld_message(grade_id, pending):
    return (f"{grade_id}（隐藏检查）这次没有运行：它的用例里有练习 {'、'.join(pending)} 的正确实现，评分程序只在那些练习的"
            "测试单元格都运行完之后才把它们送进内核；你的笔记本里这个测试单元格被移到了它们前面。"
            "把测试单元格放回原来的位置（练习的顺序），再提交。")


class SandboxedExecute(Execute):
    """Execute the grading cells (`grading_cells`: setup, answers, tests; demonstrations and the
    student's own cells never run, so they cannot cost points) in a confined kernel. A cell that
    hangs, kills its kernel or floods output costs only itself: the kernel is restarted, the cells
    that worked are replayed, grading goes on. Every output counts toward the limits."""

    max_output_bytes = Integer(100_000, help="Output kept per cell (bytes).").tag(config=True)
    max_notebook_output_bytes = Integer(1_000_000, help="Output kept per notebook (bytes).").tag(config=True)
    notebook_timeout = Integer(900, help="Wall-clock budget of one notebook (s): bounds every cell, replays included.").tag(config=True)
    spare_kernels = Integer(0, help="Kernels started ahead, each while the notebooks before it run, so that it is "
                            "ready when they end: a fresh kernel like any other. The grading command sets it to a "
                            "student's notebooks (less one where the first is not started early); 0 starts none."
                            ).tag(config=True)
    kernels_ahead = Integer(2, help="At most this many kernels started ahead at a time (they boot side by side, "
                            "on the cores the running notebook leaves idle).").tag(config=True)

    _spares = []  # (cwd, kernel manager) of the kernels started ahead, for this process's next notebooks, in order
    _spares_started = 0

    _seen_first = False

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", SandboxKernelManager)
        super().__init__(*args, **kwargs)
        self.interrupt_on_timeout = False  # a loop may swallow KeyboardInterrupt: restart instead
        self.store_widget_state = False    # widget state would land in the notebook, unbounded
        # every output is in when the notebook ends: kill the kernel (asked to stop, it outlives the 2.5 s
        # jupyter_client waits before it sends SIGTERM)
        self.shutdown_kernel = "immediate"
        self._reset()

    def _reset(self):
        self._broken, self._done, self._out_bytes, self._started = set(), [], {}, time.monotonic()
        self._run, self._probes, self._probes_allowed, self._current = set(), {}, {}, None
        self._arrived = {}
        self._replaying = False
        self._case_file = None
        self._adopted = False

    def preprocess(self, nb, resources=None, km=None):
        if not SandboxedExecute._seen_first and timing.WHO["student"] is None:  # plain nbgrader's own start
            SandboxedExecute._seen_first = True
            timing.record("process start to first notebook", timing.since_process_start() or 0.0)
        self._refuse_without_sandbox()
        self._reset()
        self._run = grading_cells(nb)
        for i in self._run:
            if utils.is_grade(nb.cells[i]) and not utils.is_solution(nb.cells[i]):
                self._probes_allowed[i] = len(check_calls(nb.cells[i].source))
        nb, resources = super().preprocess(nb, resources, km)
        if self._case_file is not None:
            resources[CASES_KEY] = self._case_file
        resources[ARRIVED_KEY] = self._arrived
        return nb, resources

    def _refuse_without_sandbox(self):
        """Plain nbgrader: no notebook is graded where the sandbox cannot run (sandbox_check, once per process;
        the grading command checks before its workers start)."""
        managers = self.config.SandboxKernelManager
        if timing.WHO["student"] is None and managers.get("sandbox", True):
            refused = sandbox_check.checked()
            if refused is not None:  # a fresh one each time: raised again, one object would pile up tracebacks
                raise type(refused)(refused.cause, refused.advice)

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        if cell.cell_type != "code" or not cell.source.strip():
            return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        if cell_index not in self._run:
            cell.outputs, cell.execution_count = [], None
            return cell
        if self._time_left() <= 0:
            cell.outputs = [_error_output("未执行", self._over_budget() + "这个单元格没有运行。")]
            return cell
        self._current = cell_index
        try:
            await self._deliver_cases(cell_index)
            with timing.timed("cells"):
                result = await super().async_execute_cell(cell, cell_index, execution_count, store_history)
            self._done.append(cell_index)
            return result
        except Exception as exc:  # a timeout, a dead kernel, or a message nbclient cannot read: this cell only
            if self._time_left() <= 0:
                why = self._over_budget() + "这个单元格被终止"
            elif isinstance(exc, CellTimeoutError):
                why = f"运行超过 {self.timeout} 秒，已终止"
            elif isinstance(exc, DeadKernelError):
                why = "内核在运行这个单元格时退出了（os._exit、内存或 CPU 时间超限、崩溃）"
            else:
                why = f"内核发来了无法读取的消息（{type(exc).__name__}），已丢弃"
            cell.outputs = list(cell.get("outputs", []))[:5] + [_error_output("单元格失败", why + "；之后的单元格在重启的内核里继续运行。")]
            self._broken.add(cell_index)
            if self._time_left() > 0:  # once the budget is spent, no more kernel work
                await self._restart_and_replay(cell)
            return cell

    def _time_left(self):
        return self._started + self.notebook_timeout - time.monotonic()

    def _over_budget(self):
        return f"整本笔记本超过了 {self.notebook_timeout} 秒的时间上限，"

    def _get_timeout(self, cell):
        """A cell's timeout, never past the notebook's deadline (replayed cells included)."""
        own = super()._get_timeout(cell)
        left = max(self._time_left(), 0.1)
        return left if own is None else min(own, left)

    execute_cell = run_sync(async_execute_cell)  # the base class binds its own coroutine

    def _kernel_cwd(self):
        return self.resources.get("metadata", {}).get("path") or None

    def create_kernel_manager(self):
        spares = SandboxedExecute._spares
        self._adopted = bool(spares) and spares[0][0] == self._kernel_cwd() and spares[0][1].has_kernel
        if self._adopted:  # the kernel started first of those ahead: fresh, no cell has run in it
            self.km = spares.pop(0)[1]
            return self.km
        return super().create_kernel_manager()

    async def async_start_new_kernel(self, **kwargs):
        if self._adopted and self.km is not None and self.km.has_kernel:
            return None
        with timing.timed("kernel start"):
            return await super().async_start_new_kernel(**kwargs)

    async def _start_spare(self, cwd=None):
        """Start a later notebook's kernel now; it boots while the notebooks before it run."""
        cls = self.kernel_manager_class
        km = cls(kernel_name=self.kernel_name, config=self.config) if self.kernel_name else cls(config=self.config)
        cwd = cwd or self._kernel_cwd()
        try:
            with timing.timed("kernel start"):
                await ensure_async(km.start_kernel(extra_arguments=self.extra_arguments, **({"cwd": cwd} if cwd else {})))
        except Exception as exc:  # the next notebook starts its own, as without a spare
            self.log.warning("starting a kernel ahead failed: %s", exc)
            return
        SandboxedExecute._spares.append((cwd, km))

    start_new_kernel = run_sync(async_start_new_kernel)  # the base class binds its own coroutine

    async def _async_cleanup_kernel(self):
        with timing.timed("kernel stop"):
            return await super()._async_cleanup_kernel()

    _cleanup_kernel = run_sync(_async_cleanup_kernel)

    async def async_start_new_kernel_client(self):
        try:
            with timing.timed("kernel ready"):
                kc = await super().async_start_new_kernel_client()
        except Exception:
            if not self._adopted:
                raise
            self.log.warning("the kernel started ahead did not come up; starting a fresh one")
            self._adopted = False
            self.km = super().create_kernel_manager()
            await self.async_start_new_kernel()
            with timing.timed("kernel ready"):
                kc = await super().async_start_new_kernel_client()
        lock = getattr(self.km, "lock_runtime_dir", None)
        if lock is not None:  # the kernel is ready: its sockets exist, no student code has run
            lock()
        while (len(SandboxedExecute._spares) < self.kernels_ahead
               and SandboxedExecute._spares_started < self.spare_kernels):
            SandboxedExecute._spares_started += 1
            await self._start_spare()
        return kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    async def _fresh_kernel(self):
        """Kill the kernel and start a new one with a new client (new sockets)."""
        try:
            self.kc.stop_channels()
            await ensure_async(self.km.shutdown_kernel(now=True))
        except Exception as exc:  # a kernel that is already gone
            self.log.warning("shutting down the failed kernel: %s", exc)
        if not self.km.context.closed:
            self.km.context.destroy(linger=0)
        self.km = self.create_kernel_manager()
        await self.async_start_new_kernel()
        await self.async_start_new_kernel_client()

    async def _restart_and_replay(self, failed_cell):
        self.log.warning("fresh kernel after a failed cell; replaying %d cells", len(self._done))
        timing.record("restart", 0.0)
        await self._fresh_kernel()
        nb = self.nb
        self._replaying = True  # replayed outputs are thrown away: they are neither kept nor counted
        try:
            await self._replay(nb)
        finally:
            self._replaying = False

    async def _replay(self, nb):
        for index in list(self._done):
            if self._time_left() <= 0:
                return
            original = nb.cells[index]
            shadow = NotebookNode(cell_type="code", source=original.source, metadata=NotebookNode(),
                                  outputs=[], execution_count=None)
            try:
                await self._deliver_cases(index)
                await super().async_execute_cell(shadow, index, None, False)
            except Exception:  # timeout, dead kernel, a message nbclient cannot read: drop this cell from the replay
                self._done.remove(index)
                if self._time_left() <= 0:
                    return
                await self._fresh_kernel()
            finally:
                nb.cells[index] = original  # nbclient stores the executed cell back by index

    def _cases_of(self, index):
        """The source of a hidden cell that hands the kernel the cases of test cell `index`'s checks (this run's
        seed): sent just before the test cell, so no answer cell ever sees a case before its check runs."""
        cell = self.nb.cells[index]
        calls = check_calls(cell.source) if utils.is_grade(cell) and not utils.is_solution(cell) else []
        if not calls:
            return None
        from autograder.exercises.checks import case_file_of_seed, read_case_file
        from autograder.exercises.private import for_kernel

        if self._case_file is None:  # the run's case file, else one made once per process from the seed
            with timing.timed("cases"):
                self._case_file = (getattr(self.km, "case_file", "")
                                   or case_file_of_seed(getattr(self.km, "grader_seed", 0)))
        data = read_case_file(self._case_file)
        held = withheld(self.nb, index)
        wanted = {}
        for grade_id, hidden in calls:
            kind = "hidden" if hidden else "public"
            if kind in data.get(grade_id, {}):
                wanted.setdefault(grade_id, {})[kind] = [] if hidden and grade_id in held else for_kernel(data[grade_id][kind])
        text = json.dumps(wanted, separators=(",", ":"))
        return f"__import__('w1d1_student.runner', fromlist=['receive']).receive({text!r})"

    async def _deliver_cases(self, index):
        """Run the delivery silently: IPython then triggers no cell event that carries its source (pre_run_cell,
        post_run_cell: a callback of the student's would read the cases there) and keeps no history of it; what it
        prints, the next cell's loop drops (another parent)."""
        source = self._cases_of(index)
        if source is None:
            return
        sent = self.kc.execute(source, silent=True, store_history=False, allow_stdin=False, stop_on_error=False)
        await self.async_wait_for_reply(await ensure_async(sent), self.nb.cells[index])

    def _is_probe(self, content, cell_index, size):
        """A check's result: only in a test cell, only as many as it has checks, plain and small."""
        data = content.get("data", {})
        if set(data) != {MIME, "text/plain"} or size > wire.MAX_PAYLOAD_BYTES + 4096:
            return False
        seen = self._probes.get(cell_index, 0)
        if seen >= self._probes_allowed.get(cell_index, 0):
            return False
        self._probes[cell_index] = seen + 1
        return True

    def _admit(self, content, cell_index):
        """Count one output against the cell's and the notebook's budgets; False when it is dropped.
        A probe has a budget of its own (it never reaches the notebook: the verdict replaces it)."""
        size = len(json.dumps(content, default=str))
        if self._is_probe(content, cell_index, size):
            return True
        used = self._out_bytes.get(cell_index, 0) + size
        if used > self.max_output_bytes or sum(self._out_bytes.values()) + size > self.max_notebook_output_bytes:
            return False
        self._out_bytes[cell_index] = used
        return True

    def _keep_probe(self, content, cell_index):
        """Keep every check result as it arrives, in the grader's memory: the verdict reads these, not the cell's
        outputs, which later messages of the kernel's (a clear_output from a thread of the student's) could change."""
        data = content.get("data")
        if isinstance(data, dict) and MIME in data:
            self._arrived.setdefault(cell_index, []).append(data[MIME])

    def output(self, outs, msg, display_id, cell_index):
        if self._replaying:
            return None
        content = msg.get("content", {})
        self._keep_probe(content, cell_index)
        if not self._admit(content, cell_index):
            if not any(o.get("name") == "stdout" and "其余部分已丢弃" in o.get("text", "") for o in outs):
                outs.append(_stream(f"\n…（输出超过 {self.max_output_bytes} 字节或整本 "
                                    f"{self.max_notebook_output_bytes} 字节，其余部分已丢弃）\n"))
            return None
        return super().output(outs, msg, display_id, cell_index)

    def _update_display_id(self, display_id, msg):
        # an update rewrites outputs already kept: it pays like a new output of the running cell
        if not self._replaying and self._current is not None:
            self._keep_probe(msg.get("content", {}), self._current)
        if not self._replaying and self._current is not None and self._admit(msg.get("content", {}), self._current):
            super()._update_display_id(display_id, msg)


def start_first_kernel(config, cwd):
    """Start the first notebook's kernel at once (a grading worker, before nbgrader's own start-up), in
    the folder nbgrader will grade in: it boots while nbgrader reads the submission."""
    SandboxedExecute._spares_started += 1
    run_sync(SandboxedExecute(config=config)._start_spare)(cwd)


def discard_spare_kernels():
    """End the kernels started ahead that no notebook took, and start counting again (a grading worker, at
    the end of its student)."""
    spares, SandboxedExecute._spares = SandboxedExecute._spares, []
    SandboxedExecute._spares_started = 0
    for _, km in spares:
        try:
            run_sync(km.shutdown_kernel)(now=True)
        finally:
            if not km.context.closed:
                km.context.destroy(linger=0)


def _decoded(text):
    try:
        return wire.loads(text if isinstance(text, str) else json.dumps(text))
    except Exception:  # malformed, too deep (RecursionError) …: this probe is unusable
        return None


def _payloads(cell, arrived=None):
    """The check results of a test cell: those the kernel sent while it ran (`arrived`, the executor's record), or
    where no kernel ran here, those in the cell's outputs."""
    if arrived is not None:
        return [_decoded(text) for text in arrived]
    return [_decoded(out["data"][MIME]) for out in cell.get("outputs", [])
            if out.get("output_type") in ("display_data", "execute_result") and MIME in out.get("data", {})]


def answer_problems(nb, grade_id, names):
    """Why exercise `grade_id` scores 0 whatever its checks report: its answer cells (provenance) and what they
    reach (forbidden_calls); [] when nothing is found."""
    try:
        return provenance.answer_problems(nb, grade_id, names) + forbidden_calls.answer_problems(nb, grade_id)
    except RecursionError:  # Python runs it; the checks' readers of the code cannot follow it, nor vouch for it
        return ["答案单元格里的表达式嵌套太深，评分检查读不了这本笔记本的代码，本题计 0 分（把长的表达式拆成几行）"]


def _record(grade_id, hidden, passed, stage=None, mistakes=()):
    """One check's verdict as data (stored with the graded notebook, read by the class report)."""
    return {"grade_id": grade_id, "hidden": bool(hidden), "passed": bool(passed), "stage": stage,
            "mistakes": [[key, message] for key, message in mistakes]}


def judge_cell(nb, cell, seed, case_file=None, arrived=None):
    """The verdict of one autograder test cell as (passed, message, records): records, one per check
    of the cell, carry the same diagnosis as data (`_record`). `arrived`: the executor's record of the check
    results the kernel sent ({cell index: [...]}; None where no kernel ran here: the cell's outputs)."""
    calls = check_calls(cell.source)
    if not calls:
        return False, "这个测试单元格里没有检查（单元格可能被改动过）。", []
    index = next(i for i, c in enumerate(nb.cells) if c is cell)
    payloads = _payloads(cell, None if arrived is None else arrived.get(index, []))
    held = withheld(nb, index)
    lines, records = [], []
    for grade_id, hidden in calls:
        kind = "隐藏检查" if hidden else "公开检查"
        try:
            names = registry.driver(grade_id).names
        except KeyError:
            return False, f"未知的练习 {grade_id}", records
        problems = answer_problems(nb, grade_id, names)
        if problems:
            records.append(_record(grade_id, hidden, False, mistakes=[(None, p) for p in problems]))
            return False, f"{grade_id}：" + "；".join(problems) + "。", records
        if hidden and grade_id in held:
            message = withheld_message(grade_id, held[grade_id])
            records.append(_record(grade_id, hidden, False, mistakes=[(None, message)]))
            return False, message, records
        mine = [p for p in payloads if isinstance(p, dict) and p.get("grade_id") == grade_id and bool(p.get("hidden")) == hidden]
        if len(mine) != 1 or len(payloads) != len(calls):
            records.append(_record(grade_id, hidden, False))
            return False, (f"{grade_id}（{kind}）没有得到可用的检查结果：单元格没有运行完"
                           "（前面的错误、超时或内核退出），或者输出被改动。"), records
        verdict = judge_payload(mine[0], seed=seed, case_file=case_file)
        records.append(_record(grade_id, hidden, verdict.passed, verdict.stage, verdict.mistakes))
        if not verdict.passed:
            return False, f"{grade_id}（{kind}）未通过：\n{verdict.message}", records
        lines.append(f"✅ {grade_id}：{kind}通过")
    return True, "\n".join(lines), records


class JudgeProbes(NbGraderPreprocessor):
    """Replace every autograder test cell's outputs by the grader's own verdict."""

    seed = Integer(0, help="Seed of the check cases where no kernel ran (the kernels' case file rules).").tag(config=True)

    def preprocess(self, nb, resources):
        with timing.timed("judging"):
            return self._judge_all(nb, resources)

    def _judge_all(self, nb, resources):
        seed, case_file = self.seed, resources.get(CASES_KEY)  # the cases the kernel was given
        arrived = resources.get(ARRIVED_KEY)
        for cell in nb.cells:
            if cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell):
                try:
                    passed, message, records = judge_cell(nb, cell, seed, case_file, arrived)
                except Exception as exc:  # a verdict that cannot be reached costs this test cell only
                    passed, message, records = False, f"这个检查的结果无法判定（{type(exc).__name__}），这一项记 0 分。", []
                cell.outputs = [_stream(message + "\n")] if passed else [_error_output(VERDICT_ENAME, message)]
                cell.metadata[OWN_KEY] = {VERDICTS_KEY: records}  # the grader's own: intake cleared the student's
        return nb, resources
