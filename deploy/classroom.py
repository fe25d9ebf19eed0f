"""A class on one machine, in the shape of The Littlest JupyterHub: system users with PAM logins,
one server per user (LocalProcessSpawner), a student environment and an instructor environment
outside the home folders, and nbgrader's exchange shared by all.

`python -m deploy.classroom serve` is what `make hub` runs (as root); tests/test_hub.py uses the
same `Classroom` to set up a throw-away class and to remove every user, process and file after.
"""
import argparse
import contextlib
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
COURSE = "w1d1-attention"
PROXY = DEPLOY / "node_modules" / ".bin" / "configurable-http-proxy"
HUB_CONFIG = DEPLOY / "jupyterhub_config.py"
STUDENT_HIDDEN_EXTENSIONS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                             "@jupyter/nbgrader:course-list")
# what the instructor's nbgrader runs from (the course's configuration, grader, answers and release), copied out of
# the repo for the class: wherever the admin cloned it (/root, a home folder), the instructor reads the copy
GRADER_PARTS = ("nbgrader_config.py", "autograder", "solutions", "notebooks", "student")

# nbgrader leaves a file over this size (kB) out of a submission (its default is 100 MB): one student's
# big file does not fill the shared exchange; a notebook over it goes in without its outputs (w1d1_student.exchange).
# 20 MiB, under the grader's bound of a notebook read as it is (autograder.chain.intake_chain.MAX_FILE_BYTES)
MAX_FILE_KB = 20971

# JupyterLab defaults for the class: no news prompt over the notebook; every cell kept in the page
LAB_OVERRIDES = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
                 "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"}}


@dataclass
class Classroom:
    prefix: Path = Path("/opt/w1d1-hub")
    instructor: str = "w1d1-teacher"
    students: list = field(default_factory=lambda: ["w1d1-alice", "w1d1-bob"])
    port: int = 8000
    name: str = "class"  # several classes (a test beside `make hub`) keep their state apart
    instructor_env: Path = None  # the repo's requirements, built by its venv recipe (`make instructor-env`)
    # the repo readable by this class's instructor only (one class at a time can close it: a class that needs
    # no answers, such as tests/test_exchange_faults.py beside test_hub's, leaves it as it is)
    close_repo: bool = True

    def __post_init__(self):
        self.prefix = Path(self.prefix)
        self.instructor_env = Path(self.instructor_env or self.prefix / f"instructor-{checkout_tag()}")

    @property
    def student_env(self):
        return self.prefix / "student"

    @property
    def state(self):
        return self.prefix / self.name

    @property
    def student_config(self):
        """This class's Jupyter config for students' servers (JUPYTER_CONFIG_PATH): classes share the env."""
        return self.state / "jupyter-student"

    @property
    def exchange(self):
        return self.state / "exchange"

    @property
    def grader(self):
        """The class's copy of the course's grading side (GRADER_PARTS), the instructor's group's alone."""
        return self.state / "grader"

    @property
    def users(self):
        return [self.instructor, *self.students]

    def course_dir(self):
        return Path(pwd.getpwnam(self.instructor).pw_dir) / COURSE

    def settings(self):
        """What deploy/jupyterhub_config.py reads."""
        return {"port": self.port, "hub_port": free_port(), "api_port": free_port(), "state": str(self.state),
                "instructor": self.instructor, "student_config": str(self.student_config),
                "students": list(self.students), "proxy": str(PROXY),
                "envs": {self.instructor: str(self.instructor_env),
                         **{s: str(self.student_env) for s in self.students}}}

    # ---- setting up -------------------------------------------------------------------------

    def setup(self):
        """Users, exchange, nbgrader configuration, a repo only the instructor can read. Returns passwords."""
        for env in (self.student_env, self.instructor_env):
            if not (env / "bin" / "jupyterhub-singleuser").exists():
                raise SystemExit(f"{env} is missing: run `make hub` (it builds both environments)")
            closed = closed_to_users(env)
            if closed:
                raise SystemExit(f"{env} 的用户读不到 {closed}（{oct(closed.stat().st_mode & 0o777)}）：班级的用户用这个环境运行 "
                                 f"Jupyter。运行 chmod -R a+rX {env}（或在 umask 022 下重新 make hub）")
        self.state.mkdir(parents=True, exist_ok=True)
        os.chmod(self.state, 0o755)
        passwords = {user: create_user(user) for user in self.users}
        # nbgrader's documented exchange: one folder everybody can write (ugo+rwx)
        self.exchange.mkdir(exist_ok=True)
        os.chmod(self.exchange, 0o777)
        self._configure_instructor()
        self._configure_students()
        if self.close_repo:
            self._close_repo()
        (self.state / "class.json").write_text(json.dumps(self.settings(), indent=1))
        return passwords

    def _configure_instructor(self):
        home = Path(pwd.getpwnam(self.instructor).pw_dir)
        course = home / COURSE
        (home / ".jupyter").mkdir(exist_ok=True)
        course.mkdir(exist_ok=True)
        if self.close_repo:
            self._copy_grader()
        (home / ".jupyter" / "nbgrader_config.py").write_text(
            instructor_nbgrader_config(course, self.exchange, grading=self.close_repo, grader=self.grader))
        for path in (home / ".jupyter", home / ".jupyter" / "nbgrader_config.py", course):
            shutil.chown(path, self.instructor, self.instructor)

    def _copy_grader(self):
        """GRADER_PARTS of the repo into `grader`: readable by the instructor's group only, whatever the repo's folder."""
        shutil.rmtree(self.grader, ignore_errors=True)
        self.grader.mkdir()
        os.chmod(self.grader, 0o750)
        os.chown(self.grader, 0, pwd.getpwnam(self.instructor).pw_gid)
        skip = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints")
        for part in GRADER_PARTS:
            if (REPO / part).is_dir():
                shutil.copytree(REPO / part, self.grader / part, ignore=skip)
            else:
                shutil.copy2(REPO / part, self.grader / part)
        for folder, dirs, files in os.walk(self.grader):
            for name in dirs:
                os.chmod(Path(folder) / name, 0o755)
            for name in files:
                os.chmod(Path(folder) / name, 0o644)

    def _configure_students(self):
        write_student_config(self.student_config, self.exchange)
        for env in (self.student_env, self.instructor_env):
            settings = env / "share" / "jupyter" / "lab" / "settings"
            settings.mkdir(parents=True, exist_ok=True)
            (settings / "overrides.json").write_text(json.dumps(LAB_OVERRIDES, indent=1))

    def _close_repo(self):
        """The repo (answers, grader) is readable by the instructor's group only; remembers how it was."""
        saved = self.state / "repo-mode.json"
        st = REPO.stat()
        if not saved.exists():
            saved.write_text(json.dumps({"mode": st.st_mode & 0o7777, "gid": st.st_gid}))
        os.chown(REPO, -1, pwd.getpwnam(self.instructor).pw_gid)
        os.chmod(REPO, 0o750)

    def _open_repo(self):
        saved = self.state / "repo-mode.json"
        if saved.exists():
            old = json.loads(saved.read_text())
            os.chown(REPO, -1, old["gid"])
            os.chmod(REPO, old["mode"])

    # ---- running ----------------------------------------------------------------------------

    def start(self, log):
        """The hub as a child process in its own session; returns the Popen."""
        env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "LANG": "C.UTF-8",
               "W1D1_HUB_CLASS": str(self.state / "class.json")}
        return subprocess.Popen([str(Path(sys.executable).parent / "jupyterhub"), "-f", str(HUB_CONFIG)],
                                cwd=self.state, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)

    def wait_up(self, proc, timeout=120):
        url = f"http://127.0.0.1:{self.port}/hub/api/"
        deadline = time.time() + timeout
        while time.time() < deadline:
            with contextlib.suppress(OSError):
                urllib.request.urlopen(url, timeout=5).close()
                return
            if proc.poll() is not None:
                raise RuntimeError(f"JupyterHub exited with {proc.returncode}")
            time.sleep(0.5)
        raise RuntimeError("JupyterHub did not answer")

    def user_command(self, user, command):
        """argv of a shell command as `user` in their home, their environment's programs first on PATH."""
        env = self.instructor_env if user == self.instructor else self.student_env
        home = pwd.getpwnam(user).pw_dir
        return ["runuser", "-u", user, "--", "env", "-i", f"HOME={home}", f"USER={user}",
                f"PATH={env}/bin:/usr/bin:/bin", "LANG=C.UTF-8", "bash", "-c", f"cd && {command}"]

    def run_as(self, user, command, check=False):
        run = subprocess.run(self.user_command(user, command), capture_output=True, text=True)
        if check and run.returncode:
            raise RuntimeError(f"{command}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
        return run

    # ---- tearing down -----------------------------------------------------------------------

    @staticmethod
    def stop(hub):
        """Stop the hub and its proxy; students' servers keep running (cleanup_servers is off)."""
        if hub is not None and hub.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(hub.pid, signal.SIGTERM)
            try:
                hub.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(hub.pid, signal.SIGKILL)
                hub.wait(timeout=30)

    def teardown(self, hub=None):
        """Stop the hub and every process of the class's users; remove users, homes, state."""
        self.stop(hub)
        for user in self.users:
            kill_user_processes(user)
            if user_exists(user):
                subprocess.run(["userdel", "--remove", user], capture_output=True)
        self._open_repo()
        shutil.rmtree(self.state, ignore_errors=True)


def instructor_nbgrader_config(course, exchange, grading=True, grader=REPO):
    """The course's own nbgrader configuration in `grader` (the repo, or the class's copy of it: sandboxed
    autograde, judges), with the course folder elsewhere; grading=False: the exchange and the course folder only
    (a class that releases and collects, no answers)."""
    repo = (f"load_subconfig({str(Path(grader) / 'nbgrader_config.py')!r})\n"
            f"c.CourseDirectory.source_directory = {str(Path(grader) / 'solutions')!r}\n") if grading else ""
    return ("# written by deploy/classroom.py: the course's nbgrader configuration for the instructor\n" + repo +
            f"c.CourseDirectory.root = {str(course)!r}\n"
            f"c.CourseDirectory.course_id = {COURSE!r}\n"
            "c.CourseDirectory.release_directory = 'release'\n"
            f"c.Exchange.root = {str(exchange)!r}\n")


def write_student_config(etc, exchange):
    """Jupyter settings of students' servers (like TLJH's /opt/tljh/user/etc/jupyter): the class's
    exchange and course; the Assignments panel and Validate, not formgrader,
    create-assignment or the instructors' course list."""
    etc = Path(etc)
    (etc / "jupyter_server_config.d").mkdir(parents=True, exist_ok=True)
    (etc / "labconfig").mkdir(parents=True, exist_ok=True)
    (etc / "nbgrader_config.py").write_text(
        "# written by deploy/classroom.py: students fetch and submit through the class's exchange\n"
        f"c.Exchange.root = {str(exchange)!r}\n"
        f"c.CourseDirectory.course_id = {COURSE!r}\n"
        f"c.CourseDirectory.max_file_size = {MAX_FILE_KB}\n"
        "c.ExchangeFactory.submit = 'w1d1_student.exchange.ClearSubmit'  # a full disk said in one line\n")
    (etc / "jupyter_server_config.d" / "zz-w1d1-student.json").write_text(json.dumps(
        {"ServerApp": {"jpserver_extensions": {"nbgrader.server_extensions.formgrader": False,
                                               "nbgrader.server_extensions.course_list": False}}}))
    (etc / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {ext: True for ext in STUDENT_HIDDEN_EXTENSIONS}}))


def checkout_tag():
    """The repo folder's name as a file name (each byte outside [A-Za-z0-9._-] a `_`, as the Makefile's `tr`)."""
    return re.sub(rb"[^A-Za-z0-9._-]", b"_", os.fsencode(REPO.name)).decode()


def closed_to_users(env):
    """The first folder or file of environment `env` (the folders above it, its python and the folders above that,
    its libraries, Jupyter's data) that another user cannot enter or read, or None."""
    python = Path(os.path.realpath(env / "bin" / "python"))
    above = [*reversed(env.parents), *reversed(python.parents)]
    steps = [env, env / "bin", python, *sorted(env.glob("lib/python3*/site-packages")), env / "share" / "jupyter"]
    for path in dict.fromkeys(above + steps):
        if path.exists() and not path.stat().st_mode & (0o001 if path.is_dir() else 0o004):
            return path
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def user_exists(name):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def create_user(name):
    """A login with a home only its owner can enter and a fresh random password."""
    if not user_exists(name):
        subprocess.run(["useradd", "--create-home", "--user-group", "--shell", "/bin/bash", name], check=True)
    password = secrets.token_urlsafe(9)
    subprocess.run(["chpasswd"], input=f"{name}:{password}\n", text=True, check=True)
    os.chmod(pwd.getpwnam(name).pw_dir, 0o700)
    return password


def uid_pids(uid):
    """The processes running as `uid`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    pids.append(int(entry.name))
    return pids


def kill_user_processes(name):
    if not user_exists(name):
        return
    uid = pwd.getpwnam(name).pw_uid
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in uid_pids(uid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.time() + 10
        while uid_pids(uid) and time.time() < deadline:
            time.sleep(0.2)


def serve(args):
    if os.geteuid() != 0:
        raise SystemExit("make hub must run as root: it creates the class's system users (PAM logins)")
    room = Classroom(prefix=Path(args.prefix), port=args.port, instructor_env=args.instructor_env)
    passwords = room.setup()
    print(f"\nJupyterHub: http://127.0.0.1:{room.port}/  (Ctrl-C stops it; `make hub-clean` removes the users)")
    for user, password in passwords.items():
        role = "教师" if user == room.instructor else "学生"
        print(f"  {role} {user:<14} 密码 {password}")
    print(f"  exchange {room.exchange}; course folder {room.course_dir()}\n", flush=True)
    hub = room.start(None)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        hub.wait()
    except KeyboardInterrupt:
        os.killpg(hub.pid, signal.SIGTERM)
        hub.wait()


def _interrupt(*_):
    raise KeyboardInterrupt


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m deploy.classroom")
    parser.add_argument("command", choices=["serve", "clean", "student-config", "instructor-config"])
    parser.add_argument("--prefix", default="/opt/w1d1-hub")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--instructor-env", default=None)
    parser.add_argument("--exchange", default="/srv/nbgrader/exchange", help="student-config: the exchange root")
    parser.add_argument("--etc", help="*-config: the environment's etc/jupyter folder")
    parser.add_argument("--course", help="instructor-config: the course folder")
    args = parser.parse_args(argv)
    if args.command == "serve":
        return serve(args)
    if args.command == "student-config":  # the Kubernetes image (deploy/kubernetes/Dockerfile)
        write_student_config(args.etc, args.exchange)
        return 0
    if args.command == "instructor-config":  # deploy/kubernetes/Dockerfile.instructor
        Path(args.etc).mkdir(parents=True, exist_ok=True)
        (Path(args.etc) / "nbgrader_config.py").write_text(instructor_nbgrader_config(args.course, args.exchange))
        return 0
    Classroom(prefix=Path(args.prefix)).teardown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
