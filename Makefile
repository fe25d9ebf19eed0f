# W1D1 attention course. Quick start: `make lab`, `make test`.
SHELL := /bin/bash
PYTHON_BOOT ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8888
NOTEBOOK_DIR ?= notebooks/w1d1
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
JOBS ?= 2
SUBMISSIONS ?= data/demo_class
OUT ?= grading

STUDENT_STAMP := $(VENV)/.student-installed
# what the student wheel is built from (autograder/wheel_inputs.py lists it; the wheel carries its digest)
STUDENT_INPUTS := $(shell $(PYTHON_BOOT) autograder/wheel_inputs.py)

.PHONY: venv lab test release grade export bench html system-deps lint selftest checks student-package report report-demo

venv: $(STAMP) $(STUDENT_STAMP)

$(STAMP): requirements.txt
	@test -x $(PY) || $(PYTHON_BOOT) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt 2>&1 | grep -v "is ignored: it is neither" || true
	@$(PY) -c "import torch, nbgrader, jupyterlab" || { echo "install failed"; exit 1; }
	@touch $(STAMP)

# The venv runs what students run: the wheel, not the repo (no .pth puts the repo on a kernel's path).
# The grader imports the package from student/ while building it (PYTHONPATH), the installed one after.
student-package: $(STAMP)
	PYTHONPATH=student $(PY) -m autograder student-package --out dist

$(STUDENT_STAMP): $(STAMP) $(STUDENT_INPUTS)
	@$(MAKE) --no-print-directory student-package
	$(PY) -m pip install -q --no-deps --force-reinstall --disable-pip-version-check dist/w1d1_student-*.whl
	@$(PY) -c "import sysconfig, os; p = os.path.join(sysconfig.get_paths()['purelib'], 'w1d1_course.pth'); os.path.exists(p) and os.remove(p)"
	@touch $(STUDENT_STAMP)

# Debian packages: bubblewrap confines student kernels while grading; chromium, a CJK and an emoji font
# let the browser tests drive JupyterLab and show its Chinese text and ✅ marks.
SYSTEM_PACKAGES := bubblewrap:bwrap chromium:chromium fonts-wqy-microhei:/usr/share/fonts/truetype/wqy/wqy-microhei.ttc \
  fonts-noto-color-emoji:/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf
system-deps:
	@missing=$$(for p in $(SYSTEM_PACKAGES); do f=$${p#*:}; { [ -e "$$f" ] || command -v "$$f" >/dev/null; } || echo $${p%%:*}; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian packages: $$missing"; \
	    apt-get install -y -q $$missing >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q $$missing >/dev/null; }; \
	  else echo "missing Debian packages (install them to grade in a sandbox and run the browser tests): $$missing"; fi; \
	fi

lab: venv
	@echo "JupyterLab: http://127.0.0.1:$(PORT)/lab (the token is in the URL printed below)"
	$(VENV)/bin/jupyter lab --notebook-dir=$(NOTEBOOK_DIR) --ip=127.0.0.1 --port=$(PORT) --no-browser $(ROOT_FLAG)

test: venv system-deps
	$(PY) -m pytest -q -n $(JOBS) --dist loadfile --durations=15 tests

lint: venv
	$(VENV)/bin/ruff check .

release: venv
	$(PY) -m autograder release

grade: venv system-deps
	$(PY) -m autograder grade $(SUBMISSIONS) --out $(OUT) --jobs $(JOBS)

# the class report (report.html + diagnoses.csv, exercise_stats.csv, similarity.csv) of the run in OUT, rebuilt
# from its gradebook without regrading; COURSE=DIR reads an nbgrader course folder instead (the hub's path)
report: venv
	$(PY) -m autograder report $(if $(COURSE),--course "$(COURSE)" --out "$(OUT)","$(OUT)")

# the demo class of 30 (tools/report_demo_class.py), graded into OUT with its report
report-demo: venv system-deps
	@test -n "$(OUT)" -a "$(OUT)" != grading || { echo "用法：make report-demo OUT=DIR"; exit 2; }
	$(PY) tools/report_demo_class.py "$(OUT)/class"
	$(PY) -m autograder grade "$(OUT)/class" --out "$(OUT)" --jobs $(JOBS)

# nbgrader's CSV of the grading run in OUT (its own gradebook); nbgrader calls alembic, so the venv's bin goes on PATH
export: venv
	@test -f "$(OUT)/nbgrader/gradebook.db" || { echo "没有找到 $(OUT)/nbgrader/gradebook.db：先运行 make grade OUT=$(OUT)"; exit 2; }
	cd "$(OUT)/nbgrader" && PATH="$(abspath $(VENV))/bin:$$PATH" "$(abspath $(VENV))/bin/nbgrader" export \
	  --db="sqlite:///$(abspath $(OUT))/nbgrader/gradebook.db" --to="$(abspath $(OUT))/nbgrader_grades.csv"

selftest: venv
	$(PY) solutions/w1d1_attention.py --selftest

checks: venv
	cd solutions/w1d1 && ../../$(PY) w1day1_checks.py

# as root, the second round runs as a normal user, on the instructor's env (a venv under /root is not theirs to start)
bench: venv system-deps $(if $(filter 0,$(shell id -u)),instructor-env)
	$(PY) bench/grading_cost.py --user-python $(INSTRUCTOR_ENV)/bin/python
	$(PY) bench/bench.py
	$(PY) bench/report_bench.py 300

html: venv
	$(PY) tools/build_site.py --out site

# ---- A class on one JupyterHub (deploy/): `make hub` as root on 127.0.0.1:$(HUB_PORT) ----------------
# Both environments live outside the repo and outside /root: every class user must run their Python,
# and no student may read the repo. The instructor's is built by the repo's own `venv` recipe.
HUB_PREFIX ?= /opt/w1d1-hub
HUB_PORT ?= 8000
HUB_PYTHON ?= /usr/bin/python3.11
STUDENT_ENV := $(HUB_PREFIX)/student
INSTRUCTOR_ENV ?= $(HUB_PREFIX)/instructor-$(shell basename "$(CURDIR)" | LC_ALL=C tr -c 'A-Za-z0-9._\n-' _)
HUB_PROXY := deploy/node_modules/.bin/configurable-http-proxy

.PHONY: hub hub-clean hub-envs student-env instructor-env hub-root hub-load

hub-root:
	@test "$$(id -u)" = 0 || { echo "make hub runs as root: it creates the class's system users and /opt environments"; exit 1; }

$(HUB_PROXY): deploy/package.json
	cd deploy && npm install --no-audit --no-fund --loglevel=error
	@touch $@

student-env: $(STUDENT_ENV)/.installed
$(STUDENT_ENV)/.installed: deploy/student-requirements.txt requirements.txt $(STUDENT_STAMP)
	@test -x $(STUDENT_ENV)/bin/python || $(HUB_PYTHON) -m venv $(STUDENT_ENV)
	$(STUDENT_ENV)/bin/python -m pip install -q --disable-pip-version-check -r deploy/student-requirements.txt \
	  -c requirements.txt 2>&1 | grep -v "is ignored: it is neither" || true
	$(STUDENT_ENV)/bin/python -m pip install -q --no-deps --force-reinstall --disable-pip-version-check dist/w1d1_student-*.whl
	@$(STUDENT_ENV)/bin/python -c "import torch, nbgrader, jupyterlab, jupyterhub, w1d1_student" || { echo "student env: install failed"; exit 1; }
	@touch $@

instructor-env:
	@$(MAKE) -s venv VENV=$(INSTRUCTOR_ENV) PYTHON_BOOT=$(HUB_PYTHON)

hub-envs: venv $(HUB_PROXY) student-env instructor-env

hub: hub-root hub-envs
	$(PY) -m deploy.classroom serve --prefix $(HUB_PREFIX) --port $(HUB_PORT) --instructor-env $(INSTRUCTOR_ENV)

# the class at nine in the morning (deploy/load_test.py): N students at once on a throw-away class, measured;
# N="5 10 20" runs one class after another; NB is the release notebook each student runs
N ?= 5 10 20
NB ?= 01_self_attention
hub-load: hub-root hub-envs
	$(PY) -m deploy.load_test --students $(N) --notebook $(NB) --prefix $(HUB_PREFIX) --instructor-env $(INSTRUCTOR_ENV)

hub-clean: venv
	$(PY) -m deploy.classroom clean --prefix $(HUB_PREFIX)
