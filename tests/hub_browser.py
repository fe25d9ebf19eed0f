"""A JupyterHub user in headless Chromium: log in with a password, use nbgrader's Assignments panel.

Notebooks open with tests.lab_browser.Notebook, at the user's server URL.
"""
import time

from tests.lab_browser import WAIT_MS, Notebook

ASSIGNMENTS = "#nbgrader-assignment-list, .nbgrader-assignment-list"


class HubUser:
    """One class member's browser session: their own context (cookies), one page."""

    def __init__(self, browser, hub, name, password, shots):
        self.hub, self.name, self.password, self.shots = hub, name, password, shots
        self.context = browser.new_context(viewport={"width": 1400, "height": 900})
        self.page = self.context.new_page()
        self.base = f"{hub}/user/{name}"

    def login(self):
        """Sign in on the hub's login page; returns seconds until JupyterLab shows."""
        page = self.page
        page.goto(f"{self.hub}/hub/login")
        page.fill("#username_input", self.name)
        page.fill("#password_input", self.password)
        started = time.monotonic()
        page.click("#login_submit")
        page.wait_for_url(f"**/user/{self.name}/lab**", timeout=WAIT_MS)
        page.wait_for_selector(".jp-LabShell", timeout=WAIT_MS)
        return time.monotonic() - started

    def shot(self, label):
        self.shots.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(self.shots / f"{self.name}-{label}.png"))

    def nbgrader_menu(self):
        """The items of JupyterLab's Nbgrader menu."""
        self.page.get_by_role("menuitem", name="Nbgrader", exact=True).click()
        items = self.page.locator(".lm-Menu .lm-Menu-itemLabel").all_inner_texts()
        self.page.keyboard.press("Escape")
        return items

    def assignments(self):
        """Nbgrader ▸ Assignment List; returns the panel's locator once it has loaded."""
        page = self.page
        page.goto(f"{self.base}/lab?reset")
        page.wait_for_selector(".jp-LabShell", timeout=WAIT_MS)
        page.get_by_role("menuitem", name="Nbgrader", exact=True).click()
        page.locator(".lm-Menu").get_by_text("Assignment List").click()
        panel = page.locator(ASSIGNMENTS).first
        panel.wait_for(timeout=WAIT_MS)
        return panel

    def press_in_row(self, section, assignment, button):
        """Press `button` in `assignment`'s row of one list (released / fetched / submitted)."""
        panel = self.assignments()
        row = panel.locator(f"#{section}_assignments_list .list_item", has_text=assignment).first
        row.get_by_role("button", name=button).click()
        return panel

    def list_text(self, section):
        return self.assignments().locator(f"#{section}_assignments_list").inner_text()

    def notebook(self, path):
        nb = Notebook(self.page, self.base, path, self.shots, token=None)
        nb.open()
        return nb

    def close(self):
        self.context.close()
