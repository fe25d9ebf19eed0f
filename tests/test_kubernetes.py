"""deploy/kubernetes checked as far as a machine without a cluster can: the manifests and the pod parts of
values.yaml against the Kubernetes API schemas (kubernetes-validate, offline), values.yaml against the
configuration reference of the z2jh chart version it names (tests/data/z2jh-VERSION, vendored), and
the Dockerfiles' install steps run as written (their COPY sources in place) over the environments
`make hub-envs` built."""
import glob
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
KUBE = REPO / "deploy" / "kubernetes"
DATA = Path(__file__).with_name("data")
# the oldest Kubernetes the chart supports (Chart.yaml kubeVersion >=1.28) and the newest the validator knows
K8S_VERSIONS = ["1.28.0", kubernetes_validate.utils.latest_version()]


def values():
    return yaml.safe_load((KUBE / "values.yaml").read_text())


def chart_version():
    (version,) = set(re.findall(r"--version (\S+)", (KUBE / "values.yaml").read_text()))
    return version


def merged(base, over):
    """Helm's merge of user values over the chart's defaults (maps merge, everything else replaces)."""
    if isinstance(base, dict) and isinstance(over, dict):
        return {**base, **{k: merged(base[k], v) if k in base else v for k, v in over.items()}}
    return over


def helm_values(user):
    chart = DATA / f"z2jh-{chart_version()}"
    schema = yaml.safe_load((chart / "values.schema.yaml").read_text())
    return merged(yaml.safe_load((chart / "values.yaml").read_text()), user), schema


def test_values_match_the_chart_configuration_reference():
    full, schema = helm_values(values())
    jsonschema.validate(full, schema)
    # the reference is strict: a misspelt key fails (so the check above reads every key)
    typo = values()
    typo["singleuser"]["memory"]["guarante"] = typo["singleuser"]["memory"].pop("guarantee")
    with pytest.raises(jsonschema.ValidationError, match="guarante"):
        jsonschema.validate(helm_values(typo)[0], schema)


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_manifests_match_the_kubernetes_api(version):
    manifests = [doc for path in sorted(KUBE.glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text())
                 if doc and "apiVersion" in doc]
    assert [m["kind"] for m in manifests] == ["PersistentVolumeClaim"]
    for manifest in manifests:
        kubernetes_validate.validate(manifest, version, strict=True)


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_user_pod_parts_match_the_kubernetes_api(version):
    """What KubeSpawner puts into a user's pod from values.yaml: the exchange volume and its mount, and the
    memory and CPU guarantee and limit as the container's requests and limits."""
    single = values()["singleuser"]
    resources = {"requests": {"memory": single["memory"]["guarantee"], "cpu": str(single["cpu"]["guarantee"])},
                 "limits": {"memory": single["memory"]["limit"], "cpu": str(single["cpu"]["limit"])}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "jupyter-student1"},
           "spec": {"volumes": single["storage"]["extraVolumes"],
                    "containers": [{"name": "notebook", "image": f"{single['image']['name']}:{single['image']['tag']}",
                                    "volumeMounts": single["storage"]["extraVolumeMounts"],
                                    "resources": resources}]}}
    kubernetes_validate.validate(pod, version, strict=True)
    pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claim"] = "nbgrader-exchange"  # strict: no unknown keys
    with pytest.raises(kubernetes_validate.ValidationError, match="claim"):
        kubernetes_validate.validate(pod, version, strict=True)


def docker_steps(recipe):
    """(COPY pairs, RUN commands) of a Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", (KUBE / recipe).read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    copies = [line.split()[1:] for line in lines if line.startswith("COPY ")]
    runs = [line[4:] for line in lines if line.startswith("RUN ")]
    return copies, runs


def pip_steps(recipe, build):
    """The Dockerfile's pip installs, its COPY sources laid out in `build` as the image would have them,
    as dry runs without an index: they resolve only against what this environment has installed."""
    copies, runs = docker_steps(recipe)
    commands = [part.strip() for run in runs for part in run.split(" && ") if part.strip().startswith("pip install ")]
    for *sources, dest in copies:
        for source in sources:
            target = build / dest.lstrip("/")
            if (REPO / source).is_dir():  # the folder itself, not a copy (COPY . would take the venv)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.rmdir() if target.is_dir() else None
                target.symlink_to(REPO / source, target_is_directory=True)
            else:
                target.mkdir(parents=True, exist_ok=True)
                subprocess.run(["cp", str(REPO / source), str(target)], check=True)
    for *_, dest in copies:
        commands = [c.replace(f" {dest.rstrip('/')}", f" {build / dest.strip('/')}") for c in commands]
    return [c.replace("pip install", f"{sys.executable} -m pip install --dry-run --no-index", 1) for c in commands]


def installs(text):
    """What a pip command line installs: requirement and constraint files, wheels (file names, globs expanded
    from the repo)."""
    found = []
    for name in re.findall(r"(\S+(?:\.txt|\.whl))\b", text):
        found += [Path(f).name for f in glob.glob(str(REPO / name))] if "*" in name else [Path(name).name]
    return sorted(found)


@pytest.mark.parametrize("recipe, make_target", [("Dockerfile", "$(STUDENT_ENV)/.installed:"),
                                                 ("Dockerfile.instructor", "$(STAMP): requirements.txt")])
def test_docker_pip_steps_match_make_and_resolve(recipe, make_target, tmp_path):
    """Each image installs what the Makefile installs for the same environment (`make student-env`; the
    instructor's: the venv recipe, then the student wheel), and nothing the pinned environment lacks."""
    commands = pip_steps(recipe, tmp_path)
    makefile = (REPO / "Makefile").read_text().replace("\\\n", " ")
    made = makefile.split(make_target, 1)[1].split("\n\n", 1)[0]
    if recipe == "Dockerfile.instructor":  # make venv = the requirements, then the student wheel
        made += makefile.split("$(STUDENT_STAMP): $(STAMP)", 1)[1].split("\n\n", 1)[0]
    made_installs = [line for line in made.splitlines() if "pip install" in line]
    assert installs(" ".join(commands)) == installs(" ".join(made_installs).replace("$(VENV)/", "")), made_installs
    for command in commands:
        run = subprocess.run(command, shell=True, capture_output=True, text=True, cwd=tmp_path)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        assert "Would install" not in run.stdout, run.stdout[-2000:]  # nothing the pinned environment lacks
    assert any(name.startswith("w1d1_student-") for name in installs(" ".join(commands)))
