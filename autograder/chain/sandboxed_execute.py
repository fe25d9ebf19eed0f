"""The execution step (nbgrader preprocessor SandboxedExecute): the grading cells run in a confined kernel
(SandboxKernelManager) that a notebook takes from the kernels started ahead (kernel_pool.py). A cell that
hangs, kills its kernel or floods output costs only itself: the kernel is replaced, the cells that worked are
replayed, grading goes on, all within the notebook's deadline (deadline.py); outputs pay into budgets
(output_budget.py); each test cell's cases are handed over just before it (case_delivery.py).

Configured by autograder/chain/nbgrader_chain.py, so `nbgrader autograde` in this repo grades exactly like
`python -m autograder grade`."""
from jupyter_core.utils import ensure_async, run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Integer
from w1d1_student.cell_scope import grading_cells
from w1d1_student.cell_source import check_calls

from autograder import timing
from autograder.chain import case_delivery, kernel_pool
from autograder.chain.deadline import Deadline
from autograder.chain.output_budget import OutputBudget
from autograder.chain.verdicts import ARRIVED_KEY, CASES_KEY, error_output, stream_output
from autograder.kernels import sandbox_check
from autograder.kernels.kernel_manager import SandboxKernelManager


class SandboxedExecute(Execute):
    """Execute the grading cells (`grading_cells`: setup, answers, tests; demonstrations and the
    student's own cells never run, so they cannot cost points) in a confined kernel."""

    max_output_bytes = Integer(100_000, help="Output kept per cell (bytes).").tag(config=True)
    max_notebook_output_bytes = Integer(1_000_000, help="Output kept per notebook (bytes).").tag(config=True)
    notebook_timeout = Integer(900, help="Wall-clock budget of one notebook (s): bounds every cell, replays included.").tag(config=True)
    kernels_ahead = Integer(2, help="At most this many kernels started ahead at a time (kernel_pool.py): they boot "
                            "side by side on the cores the running notebook leaves idle (a notebook's cells take less "
                            "than a kernel's boot).").tag(config=True)
    kernels_ahead_in_all = Integer(-1, help="Kernels started ahead in all: the grading command sets it to a student's "
                                   "notebooks (less one where the first is started before nbgrader's own start); -1, "
                                   "plain nbgrader, which does not know how many notebooks are left: no bound."
                                   ).tag(config=True)

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

    def _reset(self, nb=None):
        self._run = grading_cells(nb) if nb is not None else set()
        checks = {i: len(check_calls(nb.cells[i].source)) for i in self._run if case_delivery.is_test(nb.cells[i])}
        self._budget = OutputBudget(self.max_output_bytes, self.max_notebook_output_bytes, checks)
        self._deadline = Deadline(self.notebook_timeout)
        self._done, self._current, self._replaying = [], None, False
        self._case_file = None
        self._adopted = False

    def preprocess(self, nb, resources=None, km=None):
        if not SandboxedExecute._seen_first and timing.WHO["student"] is None:  # plain nbgrader's own start
            SandboxedExecute._seen_first = True
            timing.record("process start to first notebook", timing.since_process_start() or 0.0)
        self._refuse_without_sandbox()
        self._reset(nb)
        nb, resources = super().preprocess(nb, resources, km)
        if self._case_file is not None:
            resources[CASES_KEY] = self._case_file
        resources[ARRIVED_KEY] = self._budget.arrived
        return nb, resources

    def _refuse_without_sandbox(self):
        """Plain nbgrader: no notebook is graded where the sandbox cannot run (sandbox_check, once per process;
        the grading command checks before its workers start)."""
        if timing.WHO["student"] is None and self._sandboxed():
            refused = sandbox_check.checked()
            if refused is not None:  # a fresh one each time: raised again, one object would pile up tracebacks
                raise type(refused)(refused.cause, refused.advice)

    def _sandboxed(self):
        return self.config.SandboxKernelManager.get("sandbox", True)

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        if cell.cell_type != "code" or not cell.source.strip():
            return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        if cell_index not in self._run:
            cell.outputs, cell.execution_count = [], None
            return cell
        if self._deadline.left() <= 0:
            cell.outputs = [error_output("未执行", self._deadline.reason() + "这个单元格没有运行。")]
            return cell
        self._current = cell_index
        try:
            await self._deliver_cases(cell_index)
            with timing.timed("cells"):
                result = await super().async_execute_cell(cell, cell_index, execution_count, store_history)
            self._done.append(cell_index)
            return result
        except Exception as exc:  # a timeout, a dead kernel, or a message nbclient cannot read: this cell only
            if self._deadline.left() <= 0:
                why = self._deadline.reason() + "这个单元格被终止"
            elif isinstance(exc, CellTimeoutError):
                why = f"运行超过 {self.timeout} 秒，已终止"
            elif isinstance(exc, DeadKernelError):
                why = "内核在运行这个单元格时退出了（os._exit、内存或 CPU 时间超限、崩溃）"
            else:
                why = f"内核发来了无法读取的消息（{type(exc).__name__}），已丢弃"
            cell.outputs = list(cell.get("outputs", []))[:5] + [error_output("单元格失败", why + "；之后的单元格在重启的内核里继续运行。")]
            if self._deadline.left() > 0:  # once the budget is spent, no more kernel work
                await self._restart_and_replay()
            return cell

    def _get_timeout(self, cell):
        """A cell's timeout, never past the notebook's deadline (replayed cells included)."""
        return self._deadline.bound(super()._get_timeout(cell))

    execute_cell = run_sync(async_execute_cell)  # the base class binds its own coroutine

    def _kernel_cwd(self):
        return self.resources.get("metadata", {}).get("path") or None

    def _kernel_key(self, cwd):
        """What a kernel started ahead must match: nothing where sandboxed (its working folder is the release's),
        else the folder nbgrader grades in."""
        return None if self._sandboxed() else cwd

    def create_kernel_manager(self):
        self.km = kernel_pool.POOL.take(self._kernel_key(self._kernel_cwd()))
        self._adopted = self.km is not None
        return self.km if self._adopted else super().create_kernel_manager()

    async def async_start_new_kernel(self, **kwargs):
        if self._adopted and self.km is not None and self.km.has_kernel:
            return None
        with timing.timed("kernel start"):
            return await super().async_start_new_kernel(**kwargs)

    start_new_kernel = run_sync(async_start_new_kernel)  # the base class binds its own coroutine

    async def _start_ahead(self, cwd=None):
        """Start a later notebook's kernel now; it boots while the notebooks before it run."""
        cls = self.kernel_manager_class
        km = cls(kernel_name=self.kernel_name, config=self.config) if self.kernel_name else cls(config=self.config)
        cwd = cwd or self._kernel_cwd()
        await kernel_pool.POOL.start(km, self._kernel_key(cwd),
                                     {"extra_arguments": self.extra_arguments, **({"cwd": cwd} if cwd else {})})

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
        while kernel_pool.POOL.wants(self.kernels_ahead, self.kernels_ahead_in_all):
            await self._start_ahead()
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

    async def _restart_and_replay(self):
        self.log.warning("fresh kernel after a failed cell; replaying %d cells", len(self._done))
        timing.record("restart", 0.0)
        await self._fresh_kernel()
        self._replaying = True  # replayed outputs are thrown away: they are neither kept nor counted
        try:
            await self._replay(self.nb)
        finally:
            self._replaying = False

    async def _replay(self, nb):
        for index in list(self._done):
            if self._deadline.left() <= 0:
                return
            original = nb.cells[index]
            shadow = NotebookNode(cell_type="code", source=original.source, metadata=NotebookNode(),
                                  outputs=[], execution_count=None)
            try:
                await self._deliver_cases(index)
                await super().async_execute_cell(shadow, index, None, False)
            except Exception:  # timeout, dead kernel, a message nbclient cannot read: drop this cell from the replay
                self._done.remove(index)
                if self._deadline.left() <= 0:
                    return
                await self._fresh_kernel()
            finally:
                nb.cells[index] = original  # nbclient stores the executed cell back by index

    def _run_case_file(self):
        """The run's case file, else one made once per process from the seed."""
        from autograder.exercises.checks import case_file_of_seed

        if self._case_file is None:
            with timing.timed("cases"):
                self._case_file = (getattr(self.km, "case_file", "")
                                   or case_file_of_seed(getattr(self.km, "grader_seed", 0)))
        return self._case_file

    async def _deliver_cases(self, index):
        """Run the delivery silently: IPython then triggers no cell event that carries its source (pre_run_cell,
        post_run_cell: a callback of the student's would read the cases there) and keeps no history of it; what it
        prints, the next cell's loop drops (another parent)."""
        source = case_delivery.delivery(self.nb, index, self._run_case_file)
        if source is None:
            return
        sent = self.kc.execute(source, silent=True, store_history=False, allow_stdin=False, stop_on_error=False)
        await self.async_wait_for_reply(await ensure_async(sent), self.nb.cells[index])

    def output(self, outs, msg, display_id, cell_index):
        if self._replaying:
            return None
        content = msg.get("content", {})
        self._budget.keep_probe(content, cell_index)
        if not self._budget.admit(content, cell_index):
            if not any(o.get("name") == "stdout" and "其余部分已丢弃" in o.get("text", "") for o in outs):
                outs.append(stream_output(self._budget.note()))
            return None
        return super().output(outs, msg, display_id, cell_index)

    def _update_display_id(self, display_id, msg):
        # an update rewrites outputs already kept: it pays like a new output of the running cell
        if self._replaying or self._current is None:
            return
        content = msg.get("content", {})
        self._budget.keep_probe(content, self._current)
        if self._budget.admit(content, self._current):
            super()._update_display_id(display_id, msg)


def start_first_kernel(config, cwd):
    """Start the first notebook's kernel at once (a grading worker, before nbgrader's own start-up), in
    the folder nbgrader will grade in: it boots while nbgrader reads the submission."""
    run_sync(SandboxedExecute(config=config)._start_ahead)(cwd)
