"""deploy/: the files parse, and they agree with the settings and the policy file the code reads."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import threading
import tomllib
import types
import typing
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, SecretStr

from bot.policy_file import load_policy_file
from bot.settings import Settings
from bot.wiring import TOOL_NAMES
from runtime.policy.model import PolicyDocument

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
POLICY_FILE = DEPLOY / "policy" / "clawgate.toml"
K8S = DEPLOY / "k8s"

ALIASES = {field.alias for field in Settings.model_fields.values() if field.alias}
# Not clawgate settings, but fine to set in the image.
PLATFORM_VARIABLES = {
    "PATH",
    "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE",
    "PIP_DISABLE_PIP_VERSION_CHECK",
    "PIP_NO_CACHE_DIR",
}
PLACEHOLDER = "REPLACE_ME"
SHUTDOWN_GRACE = Settings.model_fields["shutdown_grace"].default


def _secret_aliases() -> set[str]:
    names = set()
    for field in Settings.model_fields.values():
        annotation = field.annotation
        if annotation is SecretStr or SecretStr in typing.get_args(annotation):
            assert field.alias
            names.add(field.alias)
    return names


SECRET_ALIASES = _secret_aliases()


def test_settings_aliases_are_found() -> None:
    # The rest of this file relies on these; a refactor that drops the aliases must show here.
    assert {"REDIS_URL", "CLAWGATE_PORT", "CLAWGATE_WORKER_MODE"} <= ALIASES
    assert {"SLACK_BOT_TOKEN", "OPENAI_API_KEY", "FEISHU_APP_SECRET"} <= SECRET_ALIASES


# -- Dockerfile ---------------------------------------------------------------------------------


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of every instruction, continuation lines joined."""
    logical: list[str] = []
    pending = ""
    for raw in (DEPLOY / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "the Dockerfile ends in a continuation line"
    instructions = []
    for line in logical:
        instruction, _, args = line.partition(" ")
        instructions.append((instruction.upper(), args.strip()))
    return instructions


def _dockerfile_stages() -> list[list[tuple[str, str]]]:
    """Instructions per stage (the global ARGs before the first FROM left out)."""
    stages: list[list[tuple[str, str]]] = []
    for instruction, args in _dockerfile_instructions():
        if instruction == "FROM":
            stages.append([])
        if not stages:
            assert instruction == "ARG", f"only ARG may come before FROM, not {instruction}"
            continue
        stages[-1].append((instruction, args))
    return stages


def _global_args() -> dict[str, str]:
    """The ARGs before the first FROM, with their defaults (what FROM lines may use)."""
    defaults: dict[str, str] = {}
    for instruction, args in _dockerfile_instructions():
        if instruction == "FROM":
            break
        for item in shlex.split(args):
            name, _, value = item.partition("=")
            defaults[name] = value
    return defaults


def _base_image(stage: list[tuple[str, str]]) -> str:
    """The image a stage starts from, with the global ARGs' defaults (`${BASE}` → …)."""
    image = _args(stage, "FROM")[0].split()[0]
    return re.sub(r"\$\{?(\w+)\}?", lambda m: _global_args()[m[1]], image)


def _final_stage() -> list[tuple[str, str]]:
    return _dockerfile_stages()[-1]


def _args(stage: list[tuple[str, str]], instruction: str) -> list[str]:
    return [args for name, args in stage if name == instruction]


def _image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for args in _args(_final_stage(), "ENV"):
        for item in shlex.split(args):
            name, sep, value = item.partition("=")
            assert sep, f"use ENV NAME=value, got {item!r}"
            env[name] = value
    return env


def _image_uid() -> int:
    users = _args(_final_stage(), "USER")
    assert users, "the image must switch to a non-root USER"
    user = users[-1].split(":")[0]
    assert user.isdigit(), "a numeric USER, so that Kubernetes' runAsNonRoot can verify it"
    return int(user)


def _exec_form(args: str) -> list[str]:
    value = json.loads(args)
    assert isinstance(value, list)
    return [str(item) for item in value]


def test_dockerfile_slim_non_root_and_serves_on_the_port_it_exposes() -> None:
    stages = _dockerfile_stages()
    final = stages[-1]
    # python:3.11-slim by default; deploy/smoke.sh builds it on a Debian base of its own.
    assert [_base_image(stage) for stage in stages] == ["python:3.11-slim"] * 2
    assert "BASE" in _global_args()
    assert _image_uid() != 0
    env = _image_env()
    assert set(env) <= ALIASES | PLATFORM_VARIABLES, set(env) - ALIASES - PLATFORM_VARIABLES
    assert env["CLAWGATE_HOST"] == "0.0.0.0"
    exposed = {port.split("/")[0] for args in _args(final, "EXPOSE") for port in args.split()}
    assert env["CLAWGATE_PORT"] in exposed
    assert _exec_form(_args(final, "ENTRYPOINT")[-1]) == ["clawgate"]
    assert _exec_form(_args(final, "CMD")[-1]) == ["serve"]
    # The workdir exists and belongs to the user clawgate runs as.
    workdir = env["CLAWGATE_WORKDIR"]
    assert any(workdir in run and f"chown {_image_uid()}" in run for run in _args(final, "RUN")), (
        "CLAWGATE_WORKDIR must be created and owned by the image's user"
    )
    # Every pip install skips the cache.
    installs = [run for stage in stages for run in _args(stage, "RUN") if "pip install" in run]
    assert installs
    assert all("--no-cache-dir" in run for run in installs)


def test_dockerfile_leaves_the_build_settings_and_the_package_caches_behind() -> None:
    """pip's index and CA bundle are ARGs of the build stage only (deploy/smoke.sh mounts a
    TLS-intercepting proxy's CA bundle for the build); apt leaves no lists or packages."""
    build, final = _dockerfile_stages()
    build_args = {item.partition("=")[0] for a in _args(build, "ARG") for item in shlex.split(a)}
    assert {"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CERT"} <= build_args
    assert not _args(final, "ARG")
    assert not build_args & set(_image_env())
    assert all(not args.startswith("--from") for args in _args(build, "COPY"))
    assert _args(final, "COPY") == ["--from=build /opt/venv /opt/venv"]
    for run in _args(final, "RUN"):
        if "apt-get install" in run:
            assert "--no-install-recommends" in run
            assert "apt-get clean" in run
            assert "rm -rf /var/lib/apt/lists/*" in run


def test_dockerfile_copies_every_package_the_project_builds() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = {
        p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    }
    copied = set()
    for stage in _dockerfile_stages():
        for args in _args(stage, "COPY"):
            if args.startswith("--from"):
                continue
            *sources, _dest = args.split()
            for source in sources:
                assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
                copied.add(source)
    assert packages <= copied
    assert {"pyproject.toml", "README.md"} <= copied  # the build reads both


class _Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(params=[200, 503], ids=["healthy", "unhealthy"])
def health_server(request: pytest.FixtureRequest) -> Iterator[tuple[int, int]]:
    handler = type("Handler", (_Health,), {"status": request.param})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], request.param
    finally:
        server.shutdown()
        server.server_close()


def _run_check(command: list[str], env: dict[str, str]) -> int:
    assert command[0] == "python"  # slim has no curl
    return subprocess.run(
        [sys.executable, *command[1:]], env=env, capture_output=True, timeout=30, check=False
    ).returncode


# -- compose ------------------------------------------------------------------------------------


def _compose() -> dict[str, Any]:
    data = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert isinstance(data, dict)
    return data


def _env_file_lines() -> list[tuple[bool, str, str]]:
    """(active, name, value) of every `NAME=value` or `#NAME=value` line of the env example."""
    lines = []
    for line in (DEPLOY / "clawgate.env.example").read_text().splitlines():
        match = re.fullmatch(r"(#?)([A-Za-z_][A-Za-z0-9_]*)=(.*)", line)
        if match:
            lines.append((not match[1], match[2], match[3]))
        else:
            assert line in {"", "#"} or line.startswith("# "), (
                f"neither a setting nor a comment: {line!r}"
            )
    return lines


def _service_env(service: dict[str, Any]) -> dict[str, str]:
    environment = service.get("environment", {})
    assert isinstance(environment, dict), "environment as a mapping"
    return {str(k): str(v) for k, v in environment.items()}


def _settings_from(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, **overrides: str
) -> Settings:
    for name in ALIASES:
        monkeypatch.delenv(name, raising=False)
    for name, value in {**env, **overrides}.items():
        monkeypatch.setenv(name, value)
    return Settings()


def test_env_example_lists_every_setting_once_and_no_secret() -> None:
    lines = _env_file_lines()
    names = [name for _active, name, _value in lines]
    assert set(names) <= ALIASES, set(names) - ALIASES
    assert sorted(names) == sorted(ALIASES), "every setting, each once"
    for active, name, value in lines:
        if name in SECRET_ALIASES:
            assert not active, f"{name}: leave secrets commented out in the example"
            assert PLACEHOLDER in value


def test_compose_redis_keeps_an_append_only_file() -> None:
    redis = _compose()["services"]["redis"]
    assert str(redis["image"]).startswith("redis:7")
    command = redis["command"]
    words = command if isinstance(command, list) else shlex.split(command)
    assert words[0] == "redis-server"
    assert words[words.index("--appendonly") + 1] == "yes"
    assert any(str(volume).endswith(":/data") for volume in redis["volumes"])
    assert "healthcheck" in redis


def test_compose_serve_and_worker_agree_with_the_image_and_the_settings() -> None:
    compose = _compose()
    services = compose["services"]
    serve, worker = services["serve"], services["worker"]
    image_env = _image_env()
    for name, service in (("serve", serve), ("worker", worker)):
        assert service["command"] == [name]
        build = service["build"]
        context = (DEPLOY / build["context"]).resolve()
        assert context == ROOT
        assert (context / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"
        env = _service_env(service)
        assert set(env) <= ALIASES, set(env) - ALIASES
        assert env["REDIS_URL"].startswith("redis://redis:")
        # The policy file's directory is mounted read-only (so that a replaced file is seen
        # by the reloader) where CLAWGATE_POLICY_FILE points.
        mounts = [str(v).split(":") for v in service["volumes"]]
        policy_file = Path(env["CLAWGATE_POLICY_FILE"])
        policy = [m for m in mounts if m[1] == str(policy_file.parent)]
        assert len(policy) == 1
        assert (DEPLOY / policy[0][0] / policy_file.name).resolve() == POLICY_FILE
        assert policy[0][2:] == ["ro"]
        assert sorted(p.name for p in (DEPLOY / policy[0][0]).iterdir()) == ["clawgate.toml"]
        # Both share the workdir volume (a run may resume in either process).
        assert [m[0] for m in mounts if m[1] == image_env["CLAWGATE_WORKDIR"]] == ["workdir"]
        files = service["env_file"]
        required = [f["path"] for f in files if f.get("required", True)]
        assert required == ["clawgate.env.example"]
        assert _seconds(service["stop_grace_period"]) > SHUTDOWN_GRACE
        assert service["depends_on"]["redis"]["condition"] == "service_healthy"
    assert "workdir" in compose["volumes"]
    # serve publishes the port the image listens on; the worker is optional.
    assert serve["ports"] == [f"{image_env['CLAWGATE_PORT']}:{image_env['CLAWGATE_PORT']}"]
    assert "profiles" not in serve
    assert worker["profiles"] == ["workers"]
    # serve's child worker serves its /metrics on a port of its own, as the worker service.
    assert serve["expose"] == [_service_env(serve)["CLAWGATE_METRICS_PORT"]]


def _seconds(value: str) -> float:
    match = re.fullmatch(r"(\d+)s", value)
    assert match, f"expected a duration like 30s, got {value!r}"
    return float(match[1])


def test_compose_settings_are_valid_with_and_without_the_worker_profile(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    services = _compose()["services"]
    example = {name: value for active, name, value in _env_file_lines() if active}
    local = {
        "CLAWGATE_POLICY_FILE": str(POLICY_FILE),
        "CLAWGATE_WORKDIR": str(tmp_path),
    }

    def settings(service: str, **overrides: str) -> Settings:
        env = {**_image_env(), **example, **_service_env(services[service])}
        env.pop("PATH", None)
        return _settings_from(env, monkeypatch, **local, **overrides)

    # Without the workers profile serve must do the work itself: in its child process, whose
    # metrics have a port.
    serve = settings("serve")
    assert serve.worker_topology == "child"
    assert serve.metrics_port
    assert serve.redis_url
    assert serve.host == "0.0.0.0"
    # With it, serve may hand all work to the workers.
    assert settings("serve", CLAWGATE_WORKER_MODE="none").worker_topology == "none"
    worker = settings("worker")
    assert worker.metrics_port == int(_service_env(services["worker"])["CLAWGATE_METRICS_PORT"])


# -- Kubernetes ---------------------------------------------------------------------------------


def _k8s_documents() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            assert isinstance(doc, dict), f"{path.name}: a document that is not a mapping"
            if path.name != "kustomization.yaml":
                assert "namespace" not in doc["metadata"], f"{path.name}: namespace-agnostic"
            docs.append(doc)
    return docs


def _of_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in _k8s_documents() if d["kind"] == kind}


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    container: dict[str, Any] = containers[0]
    return container


def _literal_env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def _secret_refs(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    refs = {}
    for entry in container.get("env", []):
        if "valueFrom" in entry:
            ref = entry["valueFrom"]["secretKeyRef"]
            refs[entry["name"]] = ref
    return refs


def _deployments() -> dict[str, dict[str, Any]]:
    deployments = _of_kind("Deployment")
    assert set(deployments) == {"clawgate-serve", "clawgate-worker"}
    return deployments


def _secret() -> dict[str, Any]:
    secrets = _of_kind("Secret")
    assert list(secrets) == ["clawgate-secrets"]
    return secrets["clawgate-secrets"]


def test_k8s_secret_example_holds_placeholders_only() -> None:
    data = _secret()["stringData"]
    assert "data" not in _secret()
    assert set(data) >= {
        "SLACK_BOT_TOKEN",
        "SLACK_SIGNING_SECRET",
        "FEISHU_APP_SECRET",
        "FEISHU_ENCRYPT_KEY",
        "FEISHU_VERIFICATION_TOKEN",
        "OPENAI_API_KEY",
        "REDIS_URL",
    }
    assert set(data) <= SECRET_ALIASES | {"REDIS_URL"}
    for key, value in data.items():
        assert PLACEHOLDER in value, f"{key}: not a placeholder"


def test_no_real_looking_tokens_anywhere_in_deploy() -> None:
    token = re.compile(r"\b(?:xox[abpe]|xapp|sk)-[\w-]+")
    for path in DEPLOY.rglob("*"):
        if path.is_file():
            for found in token.findall(path.read_text()):
                assert PLACEHOLDER in found, f"{path.relative_to(ROOT)}: {found}"


def test_k8s_policy_configmap_loads(tmp_path: Path) -> None:
    data = _of_kind("ConfigMap")["clawgate-policy"]["data"]
    path = tmp_path / "clawgate.toml"
    path.write_text(data["clawgate.toml"])
    load_policy_file(path, TOOL_NAMES)


def test_k8s_deployments_agree_with_settings_image_and_each_other() -> None:
    configmaps = _of_kind("ConfigMap")
    secret = _secret()
    uid = _image_uid()
    refs_by_deployment = {}
    for name, deployment in _deployments().items():
        spec = deployment["spec"]
        pod = spec["template"]
        assert spec["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
        pod_spec = pod["spec"]
        assert pod_spec["automountServiceAccountToken"] is False
        assert pod_spec["terminationGracePeriodSeconds"] > SHUTDOWN_GRACE
        assert pod_spec["securityContext"]["runAsNonRoot"] is True
        assert pod_spec["securityContext"]["runAsUser"] == uid
        container = _container(deployment)
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["resources"]["requests"] and container["resources"]["limits"]

        env = _literal_env(container)
        refs = _secret_refs(container)
        names = [e["name"] for e in container["env"]]
        assert len(names) == len(set(names))
        assert set(names) <= ALIASES, set(names) - ALIASES
        for key, ref in refs.items():
            assert ref["name"] == secret["metadata"]["name"]
            assert ref["key"] == key
            if not ref.get("optional", False):
                assert key in secret["stringData"]
        assert refs["REDIS_URL"].get("optional", False) is False
        refs_by_deployment[name] = set(refs)
        for source in container.get("envFrom", []):
            configmap = configmaps[source["configMapRef"]["name"]]
            assert set(configmap["data"]) <= ALIASES, set(configmap["data"]) - ALIASES
            assert not set(configmap["data"]) & SECRET_ALIASES, "secrets belong in the Secret"

        # Writable only where clawgate writes: the workdir and /tmp.
        volumes = {v["name"]: v for v in pod_spec["volumes"]}
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        assert {env["CLAWGATE_WORKDIR"], "/tmp"} <= set(mounts)
        # The policy file comes from the ConfigMap, read-only.
        policy = Path(env["CLAWGATE_POLICY_FILE"])
        policy_mount = mounts[str(policy.parent)]
        assert policy_mount["readOnly"] is True
        policy_map = volumes[policy_mount["name"]]["configMap"]["name"]
        assert policy.name in configmaps[policy_map]["data"]

        # Probes: /healthz and /readyz on the port the container serves HTTP on.
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        port_setting = {
            "clawgate-serve": "CLAWGATE_PORT",
            "clawgate-worker": "CLAWGATE_METRICS_PORT",
        }
        http_port = int(env[port_setting[name]])
        for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
            get = container[probe]["httpGet"]
            assert get["path"] == path
            assert ports.get(get["port"], get["port"]) == http_port
        assert env["CLAWGATE_HOST"] == "0.0.0.0"  # kubelet probes the pod's IP
    assert refs_by_deployment["clawgate-serve"] == refs_by_deployment["clawgate-worker"]


def test_k8s_serve_only_ingests_and_workers_do_the_work() -> None:
    deployments = _deployments()
    serve = _container(deployments["clawgate-serve"])
    worker = _container(deployments["clawgate-worker"])
    assert serve["args"] == ["serve"]
    assert worker["args"] == ["worker"]
    assert _literal_env(serve)["CLAWGATE_WORKER_MODE"] == "none"
    assert "CLAWGATE_METRICS_PORT" in _literal_env(worker)
    assert "CLAWGATE_WORKER_MODE" not in _literal_env(worker)


def test_k8s_service_routes_to_serve() -> None:
    services = _of_kind("Service")
    assert list(services) == ["clawgate"]
    service = services["clawgate"]["spec"]
    serve = _deployments()["clawgate-serve"]
    assert service["selector"].items() <= serve["spec"]["template"]["metadata"]["labels"].items()
    ports = {p["name"]: p["containerPort"] for p in _container(serve)["ports"]}
    for port in service["ports"]:
        assert port["targetPort"] in ports


def test_k8s_settings_are_valid(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What a serve pod would read, with only REDIS_URL in the Secret (the platforms' secrets
    are optional, and a partial set of them is rightly an error)."""
    configmaps = _of_kind("ConfigMap")
    secret = _secret()["stringData"]
    for name, deployment in _deployments().items():
        container = _container(deployment)
        env = {**_image_env(), "REDIS_URL": secret["REDIS_URL"]}
        for source in container.get("envFrom", []):
            env.update(configmaps[source["configMapRef"]["name"]]["data"])
        env.update(_literal_env(container))
        env.pop("PATH", None)
        overrides = {
            "CLAWGATE_POLICY_FILE": str(POLICY_FILE),
            "CLAWGATE_WORKDIR": str(tmp_path),
        }
        settings = _settings_from(env, monkeypatch, **overrides)
        assert settings.redis_url, name


def test_kustomization_applies_everything_but_the_secret() -> None:
    data = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    resources = set(data["resources"])
    assert all((K8S / r).is_file() for r in resources)
    manifests = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert resources == manifests - {"secret.example.yaml"}


# -- what the deploy files and their docs set ---------------------------------------------------

# Variables of deploy/smoke.sh and .ci/run, not of clawgate.
SCRIPT_VARIABLES = {"CLAWGATE_SKIP_IMAGE", "CLAWGATE_SMOKE_IMAGE", "CLAWGATE_SMOKE_NEW_BASE"}
SETTING_LIKE = re.compile(
    r"\b((?:CLAWGATE|SLACK|FEISHU|OPENAI)_[A-Z0-9_]+|REDIS_URL)=([^\s`'\",)]*)"
)


def _documented_settings() -> set[str]:
    """The names in the first column of docs/configuration.md's tables."""
    names = set()
    for line in (ROOT / "docs" / "configuration.md").read_text().splitlines():
        if line.startswith("|"):
            names.update(re.findall(r"`([A-Z][A-Z0-9_]+)`", line.split("|")[1]))
    return names


def _variables_set_by_deploy_files() -> dict[str, set[str]]:
    """Every variable the image, compose and the manifests set, by where."""
    found: dict[str, set[str]] = {}

    def add(where: str, names: typing.Iterable[str]) -> None:
        for name in names:
            found.setdefault(name, set()).add(where)

    add("deploy/Dockerfile ENV", set(_image_env()) - PLATFORM_VARIABLES)
    add("deploy/clawgate.env.example", [name for _active, name, _value in _env_file_lines()])
    for name, service in _compose()["services"].items():
        if name != "redis":
            add(f"compose.yaml {name}", _service_env(service))
    for name, deployment in _deployments().items():
        add(f"k8s {name}", [e["name"] for e in _container(deployment)["env"]])
    for name, configmap in _of_kind("ConfigMap").items():
        if name != "clawgate-policy":
            add(f"k8s ConfigMap {name}", configmap["data"])
    add("k8s secret.example.yaml", _secret()["stringData"])
    return found


def test_every_variable_the_deploy_files_set_is_a_documented_setting() -> None:
    documented = _documented_settings()
    assert {"REDIS_URL", "CLAWGATE_PORT", "SLACK_BOT_TOKEN"} <= documented  # the parse works
    for name, where in _variables_set_by_deploy_files().items():
        assert name in ALIASES, f"{name} ({', '.join(sorted(where))}): not a setting"
        assert name in documented, f"{name} ({', '.join(sorted(where))}): not in configuration.md"


def test_settings_in_the_deploy_docs_and_comments_are_real_and_their_values_valid(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`NAME=value` in docs/operations.md, the README and every deploy/ file (comments and
    deploy/smoke.sh included): a documented setting, and a value clawgate accepts unless it is a
    placeholder (`…`, `<…>`, REPLACE_ME), a shell variable or a path in the container."""
    documented = _documented_settings()
    texts = [ROOT / "docs" / "operations.md", ROOT / "README.md", ROOT / ".ci" / "run"]
    texts += [path for path in sorted(DEPLOY.rglob("*")) if path.is_file()]
    seen = 0
    for path in texts:
        for name, value in SETTING_LIKE.findall(path.read_text()):
            where = f"{path.relative_to(ROOT)}: {name}={value}"
            if name in SCRIPT_VARIABLES:
                continue
            seen += 1
            assert name in ALIASES and name in documented, f"{where}: not a documented setting"
            if not value or name in SECRET_ALIASES or re.search(r"[…<>$]|REPLACE_ME", value):
                continue
            if name in {"CLAWGATE_POLICY_FILE", "CLAWGATE_WORKDIR"}:
                continue  # paths in the container, checked against the Dockerfile above
            # Every deployment has a Redis.
            local = {
                "REDIS_URL": "redis://redis:6379/0",
                "CLAWGATE_POLICY_FILE": str(POLICY_FILE),
                "CLAWGATE_WORKDIR": str(tmp_path),
            }
            local.pop(name, None)
            try:
                _settings_from({name: value}, monkeypatch, **local)
            except ValueError as exc:
                pytest.fail(f"{where}: {exc}")
    assert seen > 20


def test_ci_proves_the_image_unless_told_not_to_and_says_so() -> None:
    run = (ROOT / ".ci" / "run").read_text()
    assert "deploy/smoke.sh" in run
    assert "CLAWGATE_SKIP_IMAGE" in run
    smoke = DEPLOY / "smoke.sh"
    assert smoke.stat().st_mode & 0o111, "deploy/smoke.sh is executable"
    assert smoke.read_text().startswith("#!/usr/bin/env bash\n")


# -- the policy file ----------------------------------------------------------------------------


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _missing_keys(model: type[BaseModel], data: dict[str, Any], where: str) -> list[str]:
    missing = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        if key not in data:
            missing.append(f"{where}{key}")
            continue
        sub = _model_of(field.annotation)
        if sub is not None:
            missing += _missing_keys(sub, data[key], f"{where}{key}.")
            continue
        args = typing.get_args(field.annotation)
        origin = typing.get_origin(field.annotation)
        if origin is dict and _model_of(args[1]) is not None:
            # Every key shown by some entry (a hook's command and url exclude each other).
            gaps = [
                {
                    m.removeprefix(f"{where}{key}.{entry_key}.")
                    for m in _missing_keys(args[1], entry, f"{where}{key}.{entry_key}.")
                }
                for entry_key, entry in data[key].items()
            ]
            assert gaps, f"{where}{key}: show one entry"
            missing += sorted(f"{where}{key}.*.{m}" for m in set.intersection(*gaps))
        elif isinstance(field.annotation, types.UnionType):
            assert all(_model_of(a) is None for a in args)
    return missing


def test_example_policy_file_loads_and_shows_every_key() -> None:
    path = POLICY_FILE
    policy = load_policy_file(path, TOOL_NAMES)
    assert policy.conversations  # the per-conversation tables are shown
    data = tomllib.loads(path.read_text())
    assert _missing_keys(PolicyDocument, data, "") == []


def test_every_deployment_lets_the_bash_sandbox_work() -> None:
    """bubblewrap in the image; the namespaces and /proc it needs allowed in compose and
    Kubernetes (without them CLAWGATE_SANDBOX=auto would ask for every bash call)."""
    final = _dockerfile_stages()[-1]
    assert any("bubblewrap" in run for run in _args(final, "RUN"))
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert {"seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"} <= set(
        compose["x-clawgate"]["security_opt"]
    )
    for deployment in _deployments().values():
        pod_security = deployment["spec"]["template"]["spec"]["securityContext"]
        assert pod_security["seccompProfile"]["type"] == "Unconfined"
        assert pod_security["appArmorProfile"]["type"] == "Unconfined"
        container = _container(deployment)
        assert container["securityContext"]["procMount"] == "Unmasked"
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
        # The API server's own rule (no schema says it): "`hostUsers` must be false to use
        # `Unmasked`"; in the pod's user namespace only uids 0-65535 exist.
        pod_spec = deployment["spec"]["template"]["spec"]
        assert pod_spec["hostUsers"] is False
        assert 0 < pod_spec["securityContext"]["runAsUser"] < 65536
