"""A class on a real JupyterHub (deploy/), driven in headless Chromium.

One instructor and two students are created as system users, log in with their passwords (PAM) and
get their own servers: students from the student environment, the instructor from the repo's
requirements. The instructor releases w1d1 (nbgrader CLI as the instructor user); in the browser a
student fetches it from the Assignments panel, answers `softmax` in 01_self_attention, sees the
public check pass and submits; a second student submits a known bug. The instructor collects,
autogrades with the repo's sandboxed configuration, checks the grades in formgrader, releases
feedback; the second student fetches it and reads the Chinese diagnosis. Screenshots:
test-output/hub/. On the same hub, two more students run deploy/load_test.py's morning at once, then
lose a server (SIGKILL) and live through a hub restart. Needs root (it creates and removes users);
skipped with that reason otherwise.
"""
import csv
import fcntl
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from autograder.course import ASSIGNMENT, RELEASE_DIR
from autograder.page_policy import CSP_META
from autograder.report.grade_tables import graded_cells
from deploy.classroom import COURSE, REPO, Classroom, free_port, uid_pids, user_exists
from tests.hub_browser import HubUser
from tests.lab_browser import CHROMIUM, LAUNCH_ARGS, PANEL, ensure_chromium
from tests.variants.nb01_self_attention import VARIANTS

SHOTS = REPO / "test-output" / "hub"
NOTEBOOK = "01_self_attention"
GRADE_ID = "softmax"
_IDS = [c.metadata.get("nbgrader", {}).get("grade_id")
        for c in nbformat.read(RELEASE_DIR / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4).cells]
ANSWER_CELL, CHECK_CELL = _IDS.index(GRADE_ID), _IDS.index(f"test_{GRADE_ID}")  # softmax's answer and public check
PASS_MESSAGE = f"✅ 公开检查通过：{GRADE_ID}"
CORRECT = VARIANTS[GRADE_ID]["solution"]
BUGGY, DIAGNOSIS = VARIANTS[GRADE_ID]["buggy"][0]
POINTS = {gid: pts for gid, pts in graded_cells(NOTEBOOK)[0] if gid in (f"test_{GRADE_ID}", f"test_{GRADE_ID}__hidden")}
LOAD = 2  # simulated students of the small load test (deploy/load_test.py)
WRITTEN = "q1_two_problems"  # a §C answer (1 point) the instructor grades by hand
PROBE = f"""
import importlib.util
print("autograder:", importlib.util.find_spec("autograder") is not None)
try:
    open({str(REPO / 'README.md')!r}).read()
    print("repo: readable")
except OSError as exc:
    print("repo:", type(exc).__name__)
"""


def why_no_class():
    if os.geteuid() != 0:
        return "creating the class's system users (useradd, PAM passwords) needs root"
    if not shutil.which("useradd") or not shutil.which("runuser"):
        return "useradd/runuser are missing: this machine cannot create users"
    return ensure_chromium()


def build_environments(room):
    """`make hub-envs` (student env, instructor env, proxy), one builder at a time."""
    with open("/tmp/w1d1-hub-envs.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        run = subprocess.run(["make", "-s", "hub-envs", f"HUB_PREFIX={room.prefix}",
                              f"INSTRUCTOR_ENV={room.instructor_env}"], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]


def as_user(room, user, command):
    return room.run_as(user, command)


def instructor(room, command):
    run = as_user(room, room.instructor, command)
    assert run.returncode == 0, f"{command}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return run.stdout


@dataclass
class RunningHub:
    """The module's class and its hub process (a test may restart it)."""
    room: Classroom
    passwords: dict
    browser: object
    log: object
    proc: object = None

    def start(self):
        self.proc = self.room.start(self.log)
        self.room.wait_up(self.proc)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.room.port}"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    reason = why_no_class()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    tag = f"{os.getpid() % 100000}"
    # ann and ben in the browser; the load test's simulated students after them
    room = Classroom(instructor=f"w1t{tag}-teacher",
                     students=[f"w1t{tag}-ann", f"w1t{tag}-ben", *(f"w1t{tag}-l{i}" for i in range(1, LOAD + 1))],
                     port=free_port(), name=f"test-{tag}")
    build_environments(room)
    log = open(tmp_path_factory.mktemp("hub") / "hub.log", "w")
    repo_mode = REPO.stat()
    running, uids = None, []
    try:
        passwords = room.setup()
        uids = [pwd.getpwnam(u).pw_uid for u in room.users]
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
            running = RunningHub(room, passwords, browser, log)
            running.start()
            yield running
            browser.close()
    finally:
        proc = running and running.proc
        room.teardown(proc)
        log.close()
        for user in room.users:  # nothing of the class is left behind
            assert not user_exists(user), f"user {user} is still there"
            assert not os.path.exists(f"/home/{user}"), f"/home/{user} is still there"
        assert not proc or proc.poll() is not None, "the hub is still running"
        assert not room.state.exists()
        assert not [pid for uid in uids for pid in uid_pids(uid)], "processes of the class are still running"
        assert (REPO.stat().st_mode, REPO.stat().st_gid) == (repo_mode.st_mode, repo_mode.st_gid)


def log_in(room, passwords, browser, name):
    user = HubUser(browser, f"http://127.0.0.1:{room.port}", name, passwords[name], SHOTS)
    user.login()
    return user


def answer_and_submit(user, source, *, probe=False):
    """Fetch w1d1 in the Assignments panel, answer softmax, run its public check, save, submit.
    Returns (public check output, probe output or None)."""
    user.press_in_row("released", ASSIGNMENT, "Fetch")
    user.page.locator("#fetched_assignments_list .list_item", has_text=ASSIGNMENT).first.wait_for()
    nb = user.notebook(f"{ASSIGNMENT}/{NOTEBOOK}.ipynb")
    probed = None
    if probe:
        nb.set_source(ANSWER_CELL, PROBE)
        nb.run_cell(ANSWER_CELL)
        probed = nb.output_text(ANSWER_CELL)
    nb.set_source(ANSWER_CELL, source)
    nb.run_cell(ANSWER_CELL)
    nb.run_cell(CHECK_CELL)
    checked = nb.output_text(CHECK_CELL)
    assert nb.page.locator(f"{PANEL} .jp-Toolbar-item", has_text="Validate").count(), "no Validate button"
    nb.show(CHECK_CELL)
    nb.shot(f"{user.name}-check")
    nb.save()
    panel = user.press_in_row("fetched", ASSIGNMENT, "Submit")
    submitted = panel.locator("#submitted_assignments_list .list_item", has_text=ASSIGNMENT)
    submitted.first.wait_for()
    user.shot("submitted")
    assert submitted.count() == 1, "the Assignments panel lists other submissions than the student's one"
    return checked, probed


def manual_score(room, student, grade_id):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{room.course_dir() / 'gradebook.db'}") as gb:
        return gb.find_grade(grade_id, NOTEBOOK, ASSIGNMENT, student).manual_score


def gradebook_scores(room):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{room.course_dir() / 'gradebook.db'}") as gb:
        return {s: {gid: float(gb.find_grade(gid, NOTEBOOK, ASSIGNMENT, s).score or 0) for gid in POINTS}
                for s in room.students[:2]}


def test_class_on_jupyterhub(hub, tmp_path):
    room, passwords, browser = hub.room, hub.passwords, hub.browser
    ann, ben = BROWSER_STUDENTS = room.students[:2]
    t0 = time.monotonic()

    def mark(what):
        print(f"[hub test] {time.monotonic() - t0:6.1f} s  {what}", flush=True)

    # the instructor's nbgrader runs the class's copy of the grader, wherever the admin cloned the repo (under /root
    # the hub's instructor could not read it)
    config = (home(room.instructor) / ".jupyter" / "nbgrader_config.py").read_text()
    assert str(REPO) not in config and str(room.grader / "nbgrader_config.py") in config, config
    instructor(room, f"nbgrader generate_assignment {ASSIGNMENT} --force && nbgrader release_assignment {ASSIGNMENT}")

    mark("released")
    # the correct student: a kernel that has no grader and cannot read the repo; the public check passes
    a = log_in(room, passwords, browser, ann)
    menu = a.nbgrader_menu()
    assert "Assignment List" in menu and "Formgrader" not in menu, menu
    checked, probed = answer_and_submit(a, CORRECT, probe=True)
    assert "autograder: False" in probed and "repo: PermissionError" in probed, probed
    assert PASS_MESSAGE in checked, checked
    mark("ann submitted")
    # the buggy student
    b = log_in(room, passwords, browser, ben)
    answer_and_submit(b, BUGGY)

    mark("ben submitted")
    # file permissions, checked as the students themselves
    course = room.course_dir()
    for target in (course, course / "gradebook.db", REPO / "solutions", room.grader / "solutions",
                   pwd.getpwnam(ben).pw_dir, room.exchange / COURSE / "inbound"):
        run = as_user(room, ann, f"ls {target}")
        assert run.returncode != 0 and "Permission denied" in run.stderr, f"{ann} can read {target}"
    assert "w1d1" in as_user(room, ann, "ls ~").stdout

    # the instructor collects and autogrades (the repo's sandboxed configuration)
    only = f"--CourseDirectory.notebook_id={NOTEBOOK}"  # the notebook they worked on: a shorter test
    instructor(room, f"nbgrader collect {ASSIGNMENT} && nbgrader autograde {ASSIGNMENT} {only}")
    mark("collected, autograded")
    scores = gradebook_scores(room)
    assert scores[ann] == POINTS, scores
    assert sum(scores[ben].values()) < sum(POINTS.values()), scores

    # the command-line grader gives the same grades for the collected submissions
    subs = tmp_path / "subs"
    subs.mkdir()
    for s in BROWSER_STUDENTS:
        (subs / s).mkdir()
        shutil.copy(course / "submitted" / s / ASSIGNMENT / f"{NOTEBOOK}.ipynb", subs / s)
    run = subprocess.run([str(room.instructor_env / "bin" / "python"), "-m", "autograder", "grade", str(subs),
                          "--out", str(tmp_path / "grading"), "--jobs", "2"], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    with open(tmp_path / "grading" / "grades.csv", newline="") as fh:
        cli = {(r["student_id"], r["grade_id"]): float(r["score"]) for r in csv.DictReader(fh)
               if r["notebook"] == NOTEBOOK and r["grade_id"] in POINTS}
    assert cli == {(s, gid): scores[s][gid] for s in BROWSER_STUDENTS for gid in POINTS}

    mark("command-line grader")

    # formgrader, in the instructor's browser, shows the same scores
    t = log_in(room, passwords, browser, room.instructor)
    assert "Formgrader" in t.nbgrader_menu()
    t.page.goto(f"{t.base}/formgrader/gradebook/{ASSIGNMENT}/{NOTEBOOK}")
    for s in BROWSER_STUDENTS:  # the name is in the row (hidden until "show names"), the score shown
        row = t.page.locator("tr", has_text=s).first
        row.wait_for()
        assert f"\t{sum(scores[s].values()):g} / " in row.inner_text(), row.inner_text()
    t.shot("formgrader")
    # ... and grades one written §C answer by hand
    t.page.locator("tr", has_text=ann).first.locator("a[href*='/formgrader/submissions/']").first.click()
    score = t.page.locator(f"input.score#{WRITTEN}")
    t.page.wait_for_load_state("networkidle")  # formgrader binds its change handlers after the page loads
    saved = False
    for _ in range(4):  # a change typed before the handlers are bound is lost: type it again
        score.fill("")
        score.fill("1")
        score.press("Tab")  # formgrader saves a score when its input loses the focus
        saved = wait_for(lambda: manual_score(room, ann, WRITTEN) == 1.0, timeout=20)
        if saved:
            break
    t.shot("manual-grade")
    assert saved, "formgrader did not save the manual grade"
    t.close()

    # the class report of the hub's course folder: the buggy student's mistake named, the hand grade counted
    # from the class's copy of the grader: the instructor never needs the admin's checkout (here: {REPO})
    instructor(room, f"cd {room.grader} && python -m autograder report --course {course} --out ~/report")
    with open(home(room.instructor) / "report" / "diagnoses.csv", newline="", encoding="utf-8") as fh:
        diagnosed = [r for r in csv.DictReader(fh) if r["grade_id"] == GRADE_ID]
    assert {r["student_id"] for r in diagnosed} == {ben}, diagnosed
    assert any(DIAGNOSIS in r["description"] for r in diagnosed), diagnosed
    page = (home(room.instructor) / "report" / "report.html").read_text(encoding="utf-8")
    row = page[page.index(f"<code>{WRITTEN}</code>"):].split("</tr>", 1)[0]
    assert CSP_META in page and "1 分 × 1" in row, row
    mark("class report")

    # feedback, generated and released by the instructor
    instructor(room, f"nbgrader generate_feedback {ASSIGNMENT} {only} && nbgrader release_feedback {ASSIGNMENT}")
    # the buggy student fetches feedback and reads the diagnosis in Chinese
    b.press_in_row("submitted", ASSIGNMENT, "Fetch Feedback")
    feedback = wait_for(lambda: sorted((home(ben) / ASSIGNMENT / "feedback").glob(f"*/{NOTEBOOK}.html")))
    b.shot("feedback-fetched")
    assert feedback, "no feedback arrived in the student's folder"
    assert CSP_META in feedback[-1].read_text(encoding="utf-8"), "the hub's feedback page has no CSP"
    rel = feedback[-1].relative_to(home(ben))
    b.page.goto(f"{b.base}/files/{rel}")  # the page a student opens from the file browser
    text = b.page.locator("body").inner_text()
    b.shot("feedback")
    assert DIAGNOSIS in text, text[:2000]
    assert not list((home(ann) / ASSIGNMENT).glob("feedback/*")), "the other student got feedback"
    a.close()
    b.close()


def wait_for(condition, timeout=60):
    """The condition's first true value, or its last value after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.5)


def home(user):
    return Path(pwd.getpwnam(user).pw_dir)


def load_config(path):
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader(path.name, path=str(path.parent)).load_config()


def test_kubernetes_recipes_configure_the_class(tmp_path):
    """deploy/kubernetes: the images' nbgrader settings point at the exchange volume that values.yaml
    mounts; the instructor's carries the repo's sandboxed grading, the students' hides formgrader."""
    import json
    import re

    import yaml

    kube = REPO / "deploy" / "kubernetes"
    values = yaml.safe_load((kube / "values.yaml").read_text())
    claim = yaml.safe_load((kube / "exchange-volume.yaml").read_text())
    storage = values["singleuser"]["storage"]
    assert storage["extraVolumes"][0]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    mount = storage["extraVolumeMounts"][0]["mountPath"]
    for recipe in ("Dockerfile", "Dockerfile.instructor"):
        text = (kube / recipe).read_text()
        (exchange,) = set(re.findall(r"--exchange (\S+)", text))
        assert exchange == mount, recipe
        (etc,) = set(re.findall(r"--etc (\S+)", text))
        command = re.search(r"classroom\.py (\S+-config)", text).group(1)
        args = ["--course", str(tmp_path / "course")] if command == "instructor-config" else []
        subprocess.run([sys.executable, str(REPO / "deploy" / "classroom.py"), command, "--exchange", exchange,
                        "--etc", str(tmp_path / recipe), *args], check=True)
        cfg = load_config(tmp_path / recipe / "nbgrader_config.py")
        assert cfg.Exchange.root == mount and etc.endswith("etc/jupyter")
        if command == "instructor-config":
            assert "SandboxedExecute" in repr(cfg.Autograde.autograde_preprocessors)
            assert cfg.CourseDirectory.source_directory == str(REPO / "solutions")
        else:
            assert cfg.CourseDirectory.course_id == COURSE
            server = json.loads((tmp_path / recipe / "jupyter_server_config.d" / "zz-w1d1-student.json").read_text())
            assert server["ServerApp"]["jpserver_extensions"]["nbgrader.server_extensions.formgrader"] is False


def test_class_at_nine_in_the_morning(hub):
    """deploy/load_test.py with LOAD students at once on the module's hub: each logs in on the form,
    starts a server through the REST API, fetches, runs 01 in a kernel over the websocket with softmax
    answered, sees its public check pass and submits; the instructor collects and autogrades them."""
    from deploy.load_test import HEADER, row, run_class

    load = hub.room.students[2:]
    m = run_class(hub.room, hub.passwords, load, NOTEBOOK, hub.proc.pid, spawn_timeout=180, cell_timeout=300)
    print(HEADER + "\n" + row(m))
    assert [r["failed"] for r in m["results"]] == [None] * LOAD, m["results"]
    for r in m["results"]:
        assert 0 < r["server_s"] < r["first_cell_s"] < r["done_s"], r
    assert m["grading_rc"] == 0, m["grading_log"]
    assert m["points"] == {s: POINTS[f"test_{GRADE_ID}"] for s in load}, m["points"]
    for s in load:  # the collected notebook is the student's own answer
        nb = nbformat.read(hub.room.course_dir() / "submitted" / s / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
        assert "np.max(x, axis=axis, keepdims=True)" in nb.cells[ANSWER_CELL].source
    # the sampler saw every process group: a kernel with numpy and a Lab server are well over 50 MiB
    assert m["hub_peak"] > 20 * 2**20 and m["proxy_peak"] > 10 * 2**20, m
    assert m["students_peak"] > LOAD * 50 * 2**20 and m["students_cpu_s"] > 0, m


def server_pids(name):
    """The pids of `name`'s single-user server processes."""
    from deploy.usage_sampler import pids_of

    found = []
    for pid in pids_of({pwd.getpwnam(name).pw_uid}):
        try:
            if b"jupyterhub-singleuser" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            pass
    return sorted(found)


def signed_in(hub, name):
    from deploy.hub_traffic import HubStudent

    student = HubStudent(hub.url, name, hub.passwords[name])
    student.log_in()
    student.request_token()
    return student


def test_hub_restart_and_a_killed_server_lose_nothing(hub):
    """Faults mid-class: one student's server killed with SIGKILL (their saved notebook survives, starting
    again gives a new server, the other student is untouched); then the hub restarted (servers and kernels
    keep running, students sign in again and find their saved work and their kernel's state)."""
    first, second = hub.room.students[2:4]
    work = "work.ipynb"
    for name in (first, second):
        student = signed_in(hub, name)
        student.start_server()
        student.wait_ready(180)
        student.save_notebook(work, nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"saved = {name!r}")]))
    kernel = signed_in(hub, first).start_kernel(work)
    assert kernel.execute("x = 41 + 1", 120)[0] == "ok"
    kernel.close()
    servers = {name: server_pids(name) for name in (first, second)}
    assert all(servers.values()), servers

    # one student's server dies (killed while the hub that started it runs: the hub reaps it; a server
    # killed after a hub restart stays a zombie where PID 1 reaps nothing, and the hub takes it for running)
    for pid in servers[second]:
        os.kill(pid, signal.SIGKILL)
    student = signed_in(hub, second)
    student.start_server()  # the hub notices the dead server and starts a new one
    student.wait_ready(180)
    assert server_pids(second) and set(server_pids(second)).isdisjoint(servers[second])
    assert student.read_notebook(work)["cells"][0]["source"] == f"saved = {second!r}"
    assert server_pids(first) == servers[first] and signed_in(hub, first).server_ready()
    servers[second] = server_pids(second)

    hub.room.stop(hub.proc)  # the hub and its proxy go down mid-class
    assert {name: server_pids(name) for name in servers} == servers, "a server stopped with the hub"
    hub.start()
    for name in (first, second):
        student = signed_in(hub, name)
        assert wait_for(student.server_ready, timeout=60), f"{name}'s server is not back behind the new hub"
        assert student.read_notebook(work)["cells"][0]["source"] == f"saved = {name!r}"
    assert {name: server_pids(name) for name in servers} == servers
    kernel = signed_in(hub, first).start_kernel(work)  # the session of the notebook: the same kernel
    assert kernel.execute("print(x)", 120) == ("ok", "42\n")
    kernel.close()
