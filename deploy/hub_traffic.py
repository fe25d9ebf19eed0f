"""One simulated student on the class's JupyterHub, as hubtraf does it: real HTTP and websocket traffic.

Log in on the hub's login form (PAM), get an API token, start the server through the hub's REST API,
fetch and submit through nbgrader's server extension (the Assignments panel's own requests), and run
a notebook's cells in a kernel over jupyter_server's REST and kernel websocket APIs. Every wait is
bounded: each request has a timeout, each poll a deadline.
"""
import json
import time
import uuid

import requests
import websocket

COURSE = "w1d1-attention"
ASSIGNMENT = "w1d1"
REQUEST_S = 60  # one HTTP request


class StepFailed(Exception):
    """A step of a student's session went wrong; `step` names it."""

    def __init__(self, step, detail):
        super().__init__(f"{step}: {detail}")
        self.step = step


def expect(step, response, *codes):
    if response.status_code not in codes:
        raise StepFailed(step, f"HTTP {response.status_code} {response.text[:300]}")
    return response


class HubStudent:
    def __init__(self, hub_url, name, password):
        self.hub, self.name, self.password = hub_url.rstrip("/"), name, password
        self.http = requests.Session()
        self.token = None
        self.base = f"{self.hub}/user/{name}"

    # ---- the hub --------------------------------------------------------------------------

    def log_in(self):
        """The login form, as a browser posts it (with the form's xsrf token)."""
        expect("login", self.http.get(f"{self.hub}/hub/login", timeout=REQUEST_S), 200)
        xsrf = self.http.cookies.get("_xsrf")
        r = self.http.post(f"{self.hub}/hub/login", data={"username": self.name, "password": self.password,
                                                          "_xsrf": xsrf}, allow_redirects=False, timeout=REQUEST_S)
        expect("login", r, 302)
        if "login" in r.headers.get("Location", "").split("?")[0]:
            raise StepFailed("login", "the hub refused the password")

    def request_token(self):
        """An API token of the logged-in student (the hub's tokens API, with the session cookie)."""
        r = self.http.post(f"{self.hub}/hub/api/users/{self.name}/tokens", json={"note": "load test"},
                           headers={"X-XSRFToken": self.http.cookies.get("_xsrf", "")}, timeout=REQUEST_S)
        self.token = expect("token", r, 200, 201).json()["token"]
        self.http.headers["Authorization"] = f"token {self.token}"

    def start_server(self):
        r = self.http.post(f"{self.hub}/hub/api/users/{self.name}/server", timeout=REQUEST_S)
        expect("spawn", r, 201, 202, 400)  # 400: already running

    def server_ready(self):
        r = expect("spawn", self.http.get(f"{self.hub}/hub/api/users/{self.name}", timeout=REQUEST_S), 200)
        server = r.json().get("servers", {}).get("")
        return bool(server and server.get("ready"))

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.server_ready():
                return
            time.sleep(1)
        raise StepFailed("spawn", f"the server was not ready after {timeout} s")

    # ---- the student's server -------------------------------------------------------------

    def assignment_action(self, action):
        """Fetch or submit through nbgrader's server extension (what the Assignments panel posts)."""
        r = self.http.post(f"{self.base}/assignments/{action}", data={"course_id": COURSE, "assignment_id": ASSIGNMENT},
                           timeout=300)
        body = expect(action, r, 200).json()
        if isinstance(body, dict) and body.get("success") is False:
            raise StepFailed(action, str(body.get("value", body))[:500])
        return body

    def read_notebook(self, path):
        r = self.http.get(f"{self.base}/api/contents/{path}", params={"content": 1}, timeout=REQUEST_S)
        return expect("open", r, 200).json()["content"]

    def save_notebook(self, path, nb):
        r = self.http.put(f"{self.base}/api/contents/{path}", json={"type": "notebook", "content": nb},
                          timeout=REQUEST_S)
        expect("save", r, 200, 201)

    def start_kernel(self, path):
        """A session for the notebook, as JupyterLab opens one; returns a KernelChannel."""
        r = self.http.post(f"{self.base}/api/sessions", json={"path": path, "name": path.rsplit("/", 1)[-1],
                                                              "type": "notebook", "kernel": {"name": "python3"}},
                           timeout=REQUEST_S)
        kernel = expect("kernel", r, 201, 200).json()["kernel"]["id"]
        ws_url = self.base.replace("http", "ws", 1) + f"/api/kernels/{kernel}/channels"
        try:
            return KernelChannel(ws_url, self.token)
        except (OSError, websocket.WebSocketException) as exc:
            raise StepFailed("kernel", repr(exc)) from exc


class KernelChannel:
    """A kernel's websocket (jupyter_server's JSON protocol): execute code, collect the output text."""

    def __init__(self, url, token):
        self.session = uuid.uuid4().hex
        self.ws = websocket.create_connection(f"{url}?session_id={self.session}", timeout=REQUEST_S,
                                              header=[f"Authorization: token {token}"])

    def execute(self, code, timeout):
        """Run one cell; returns (status, output text). Waits for its reply and the kernel's idle."""
        msg_id = uuid.uuid4().hex
        self.ws.send(json.dumps({
            "header": {"msg_id": msg_id, "username": "student", "session": self.session,
                       "msg_type": "execute_request", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": False}}))
        deadline = time.monotonic() + timeout
        status, idle, text = None, False, []
        while status is None or not idle:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StepFailed("cells", f"no reply within {timeout} s")
            self.ws.settimeout(left)
            try:
                msg = json.loads(self.ws.recv())
            except (OSError, websocket.WebSocketException) as exc:
                raise StepFailed("cells", repr(exc)) from exc
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "execute_reply":
                status = content["status"]
            elif kind == "status" and content["execution_state"] == "idle":
                idle = True
            elif kind == "stream":
                text.append(content["text"])
            elif kind == "error":
                text.append(f"{content['ename']}: {content['evalue']}")
            elif kind in ("execute_result", "display_data"):
                text.append(content["data"].get("text/plain", ""))
        return status, "".join(text)

    def close(self):
        self.ws.close()
