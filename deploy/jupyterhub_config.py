"""JupyterHub for one class on one machine, in the shape of The Littlest JupyterHub.

PAM logins of system users, one single-user server per user started as that user
(LocalProcessSpawner) in their home folder, JupyterLab by default. Students' servers run from the
student environment (no grader, no answers); the instructor's from the instructor environment
(the repo's requirements, formgrader, the sandboxed grader). `python -m deploy.classroom` writes the
class file this reads (users, ports, environments) and prepares users, exchange and nbgrader config.
"""
import json
import os
from pathlib import Path

c = get_config()  # noqa: F821

settings = json.loads(Path(os.environ.get("W1D1_HUB_CLASS", "/opt/w1d1-hub/class/class.json")).read_text())
state = Path(settings["state"])

c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = settings["port"]
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = settings["hub_port"]
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{settings['api_port']}"
c.ConfigurableHTTPProxy.command = [settings["proxy"]]
c.ConfigurableHTTPProxy.auth_token = os.environ.get("CONFIGPROXY_AUTH_TOKEN") or os.urandom(24).hex()
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(state / "jupyterhub.pid")

# who may log in: the class, with their system passwords (PAM)
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = {settings["instructor"], *settings["students"]}
c.Authenticator.admin_users = {settings["instructor"]}
c.PAMAuthenticator.open_sessions = False

# one server per user, as that user, in their home, from their environment
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.env_keep = ["LANG", "LC_ALL"]
c.Spawner.start_timeout = 180  # two cores shared by a class: a cold JupyterLab can take a while
c.Spawner.http_timeout = 180
c.JupyterHub.shutdown_on_logout = True
# a restarted hub (an upgrade, a crash) finds the students' servers still running, as TLJH does;
# `make hub-clean` stops them
c.JupyterHub.cleanup_servers = False


def use_own_environment(spawner):
    env = Path(settings["envs"][spawner.user.name])
    spawner.cmd = [str(env / "bin" / "jupyterhub-singleuser")]
    spawner.environment["PATH"] = f"{env / 'bin'}:/usr/bin:/bin"
    if spawner.user.name != settings["instructor"]:  # the class's exchange; no formgrader
        spawner.environment["JUPYTER_CONFIG_PATH"] = settings["student_config"]


c.Spawner.pre_spawn_hook = use_own_environment
