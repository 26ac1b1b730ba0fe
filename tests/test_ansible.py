"""ansible/: the playbook parses, passes ansible-lint (production profile), renders the edge's
templates into what HAProxy and iptables accept, and converges.

The edge's HAProxy config (templates/haproxy.cfg.j2 over docker/haproxy/haproxy.cfg) is rendered
by Ansible and checked by `haproxy -c`: TLS on both ways in, no plain HTTP, nothing that
amplifies (tests/haproxy_config.py). The DOCKER-USER script that keeps a Docker replica's port to
the edge is rendered and run by iptables in a network namespace of its own.

The converge runs ansible/molecule/default: provision-oracle.yml on two systemd Debian bookworm
containers, a replica in venv mode (group reame) and the edge (group reame_edge: HAProxy over TLS
and redis-server), then again to prove idempotence (changed=0). Then the verify: a chat
completion on the replica, its port open to the edge and closed to the Docker host (not the
edge), the store's password and the tier's secret generated and kept out of the store's URL, a
chat completion through HAProxy over HTTPS from outside (checked against the self-signed
certificate), the prompt's snapshot in the edge's store, and the store closed to what is not a
replica. The model comes from
tests/fake_hub.py (the real SmolLM2 file, served on the docker bridge so the container reaches
it); llama-cpp-python from the prebuilt wheels in REAME_WHEELS_DIR (compiling it in the test
host would take 15 minutes), e.g. docker/Dockerfile's `wheels` stage:

    DOCKER_BUILDKIT=1 docker build -f docker/Dockerfile --target wheels -o type=local,dest=DIR .
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_hub import FakeHub
from haproxy_config import (
    amplifications,
    directives,
    open_stats_pages,
    retry_conditions,
    sections,
)
from reame.models.catalog import CATALOG

ROOT = Path(__file__).resolve().parent.parent
ANSIBLE = ROOT / "ansible"
SCENARIO = ANSIBLE / "molecule" / "default"
TEST_IMAGE = "reame-test/systemd-bookworm:local"  # the name molecule.yml uses
HOSTS = ("reame-test-host", "reame-test-edge")  # molecule.yml's replica and edge


def tool(name: str) -> str:
    """The tool from the running Python's environment, else from PATH; skip if it is neither."""
    beside = Path(sys.executable).parent / name
    path = str(beside) if beside.is_file() else shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (pip install ansible ansible-lint molecule ...)")
    return path


def run(cmd: list[str], timeout: float, **kwargs: object) -> subprocess.CompletedProcess[str]:
    kwargs.setdefault("env", {**os.environ, "NO_COLOR": "1"})
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, check=False, **kwargs
    )


def test_the_playbook_parses() -> None:
    out = run(
        [
            tool("ansible-playbook"),
            "--syntax-check",
            "-i",
            "inventory.example.ini",
            "provision-oracle.yml",
        ],
        timeout=120,
        cwd=ANSIBLE,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_ansible_lint_passes_the_production_profile() -> None:
    # ansible/.ansible-lint asks for the production profile; --offline: no Galaxy here
    out = run([tool("ansible-lint"), "--offline"], timeout=300, cwd=ANSIBLE)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Profile 'production' was required, and it passed" in out.stdout + out.stderr


# -- templates rendered by Ansible itself, run by what reads them -------------------------------

RENDER_PLAYBOOK = """
- hosts: edge
  connection: local
  gather_facts: false
  vars_files: [{group_vars}]
  tasks:
    - ansible.builtin.template: {{src: "{src}", dest: "{dest}", mode: "0644"}}
"""
INVENTORY = """
[reame]
r1 reame_address=10.0.0.11 reame_port=8000
r2 reame_address=10.0.0.12 reame_port=8000
[reame_edge]
edge reame_address=10.0.0.20
"""


def render(template: str, work: Path, **extra: object) -> str:
    """ansible/templates/TEMPLATE for the edge of a two-replica inventory, with group_vars/all.yml
    and `extra` as variables."""
    (work / "inventory.ini").write_text(INVENTORY)
    dest = work / template.removesuffix(".j2")
    playbook = work / "render.yml"
    playbook.write_text(
        RENDER_PLAYBOOK.format(
            group_vars=ANSIBLE / "group_vars" / "all.yml",
            src=ANSIBLE / "templates" / template,
            dest=dest,
        )
    )
    extra_vars = {
        "reame_source_dir": str(ROOT),
        "ansible_python_interpreter": sys.executable,
        **extra,
    }
    out = run(
        [
            tool("ansible-playbook"),
            "-i",
            str(work / "inventory.ini"),
            str(playbook),
            "-e",
            json.dumps(extra_vars),
        ],
        timeout=300,
        cwd=work,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return dest.read_text()


def self_signed(work: Path) -> Path:
    pem = work / "reame.pem"
    made = run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=edge", "-keyout", str(work / "key.pem"),
         "-out", str(work / "cert.pem")],
        timeout=60,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    pem.write_text((work / "cert.pem").read_text() + (work / "key.pem").read_text())
    return pem


def test_the_edges_haproxy_config_ends_tls_serves_no_plain_http_and_does_not_amplify(
    tmp_path: Path,
) -> None:
    text = render("haproxy.cfg.j2", tmp_path, reame_haproxy_by_body=True, reame_haproxy_promex=True)
    binds = sorted(" ".join(words[1:]) for _, words in directives(text, "bind"))
    tls = "ssl crt /etc/haproxy/certs/reame.pem alpn h2,http/1.1"
    assert binds == ["127.0.0.1:8404", f":443 {tls}", f":8443 {tls}"]
    assert amplifications(text) == [] and open_stats_pages(text) == []
    assert "503" in retry_conditions(text)
    servers = sorted(" ".join(words[1:]) for _, words in directives(text, "server"))
    assert servers == ["r1 10.0.0.11:8000", "r1 10.0.0.11:8000", "r2 10.0.0.12:8000",
                       "r2 10.0.0.12:8000"]  # fmt: skip
    if shutil.which("haproxy") is None:
        pytest.skip("haproxy is not installed (Debian: apt-get install haproxy)")
    config = tmp_path / "haproxy.cfg"
    pem = self_signed(tmp_path)
    config.write_text(text.replace("/etc/haproxy/certs/reame.pem", str(pem)))
    checked = run(["haproxy", "-c", "-f", str(config)], timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_an_old_haproxy_gets_neither_the_by_body_way_nor_an_empty_metrics_port(
    tmp_path: Path,
) -> None:
    text = render(
        "haproxy.cfg.j2", tmp_path, reame_haproxy_by_body=False, reame_haproxy_promex=False
    )
    binds = [" ".join(words[1:2]) for _, words in directives(text, "bind")]
    assert binds == [":443"]
    assert "frontend stats" not in sections(text) and "backend replicas_by_body" not in sections(
        text
    )


def test_dockers_published_port_is_kept_to_the_edge_in_docker_user(tmp_path: Path) -> None:
    """The DOCKER-USER script run for real, in a network namespace of its own."""
    if shutil.which("unshare") is None or shutil.which("iptables") is None:
        pytest.skip("needs unshare and iptables")
    script = tmp_path / "docker-user.sh"
    script.write_text(
        render(
            "docker-user.sh.j2",
            tmp_path,
            ansible_facts={"default_ipv4": {"interface": "ens3"}},
            reame_fw={"port": 8000, "sources": ["10.0.0.20"]},
        )
    )
    inside = f"sh {script} && echo --- && sh {script} && echo --- && iptables -S DOCKER-USER"
    out = run(["unshare", "--net", "sh", "-c", inside], timeout=60)
    if out.returncode != 0 and "unshare" in out.stderr:
        pytest.skip(f"no network namespace here: {out.stderr.strip()}")
    assert out.returncode == 0, out.stdout + out.stderr
    first, again, rules = out.stdout.split("---\n")
    assert first.split() == ["changed", "changed"] and again == ""  # idempotent
    assert rules.splitlines()[1:] == [
        "-A DOCKER-USER -s 10.0.0.20/32 -i ens3 -p tcp -m conntrack --ctorigdstport 8000 "
        "--ctdir ORIGINAL -j RETURN",
        "-A DOCKER-USER -i ens3 -p tcp -m conntrack --ctstate NEW --ctorigdstport 8000 "
        "--ctdir ORIGINAL -j DROP",
    ]


# -- the converge on a systemd test host ---------------------------------------------------------


def docker_bridge_gateway() -> str:
    """The host's address on the default docker bridge: where a container reaches the host."""
    if shutil.which("docker") is None:
        pytest.skip("no docker CLI to run the test host with")
    out = run(["docker", "network", "inspect", "bridge"], timeout=60)
    if out.returncode != 0:
        pytest.skip(f"no Docker engine to run the test host in: {out.stderr.strip()}")
    gateway = re.search(r'"Gateway":\s*"([0-9.]+)"', out.stdout)
    if gateway:
        return gateway[1]
    subnet = re.search(r'"Subnet":\s*"([0-9./]+)"', out.stdout)
    assert subnet, f"the bridge network has neither a gateway nor a subnet: {out.stdout}"
    return str(next(ipaddress.ip_network(subnet[1]).hosts()))


@pytest.fixture
def bridge_hub(smollm2_path: Path) -> Iterator[FakeHub]:
    """The hub with the real SmolLM2 file, listening where the test container reaches it."""
    address = docker_bridge_gateway()
    entry = CATALOG["smollm2-135m"]
    hub = FakeHub(bind=address)
    hub.add(entry.hf_repo, entry.hf_file, smollm2_path.read_bytes())
    hub.start()
    hub.url = hub.url.replace("127.0.0.1", address)
    try:
        yield hub
    finally:
        hub.stop()


@pytest.fixture
def wheels() -> Path:
    """The prebuilt wheels (checked first: without them nothing else is worth starting)."""
    value = os.environ.get("REAME_WHEELS_DIR", "")
    if not value:
        pytest.skip(
            "REAME_WHEELS_DIR is not set: it names a directory holding a prebuilt "
            "llama_cpp_python wheel for this machine (docker/Dockerfile's `wheels` stage)"
        )
    path = Path(value)
    if not any(path.glob("llama_cpp_python-*.whl")):
        pytest.skip(f"REAME_WHEELS_DIR={value} holds no llama_cpp_python-*.whl")
    return path.resolve()


def recap(output: str, host: str) -> list[str]:
    """The PLAY RECAP lines of a test host, one per ansible-playbook run."""
    return re.findall(rf"^{re.escape(host)}\s+:\s+ok=.*$", output, flags=re.M)


@pytest.mark.model
@pytest.mark.timeout(2400)
def test_converge_is_idempotent_and_healthy(
    wheels: Path, bridge_hub: FakeHub, tmp_path: Path
) -> None:
    molecule = tool("molecule")
    dist = tmp_path / "dist"
    built = run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(dist), str(ROOT)],
        timeout=600,
    )
    if built.returncode != 0:
        pytest.fail(built.stdout + built.stderr)
    (package,) = dist.glob("reame-*.whl")

    image = run(
        ["docker", "build", "-t", TEST_IMAGE, str(SCENARIO)],
        timeout=900,
        env={**os.environ, "DOCKER_BUILDKIT": "0"},
    )
    if image.returncode != 0:
        pytest.fail(image.stdout + image.stderr)

    env = {
        **os.environ,
        "REAME_TEST_PACKAGE": str(package),
        "REAME_WHEELS_DIR": str(wheels),
        "REAME_TEST_HUB": bridge_hub.url,
        "NO_COLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "PY_COLORS": "0",
    }
    out = run([molecule, "test"], timeout=2300, cwd=ANSIBLE, env=env)
    log = out.stdout + out.stderr
    (tmp_path / "molecule.log").write_text(log)
    recaps = {host: recap(log, host) for host in HOSTS}
    print("PLAY RECAP of the test hosts (prepare, converge, idempotence, verify):")
    print("\n".join(line for lines in recaps.values() for line in lines))
    if out.returncode != 0:
        pytest.fail(f"molecule test failed (exit {out.returncode}):\n{log[-20000:]}")
    for lines in recaps.values():
        # prepare, converge, the idempotence run and verify, in that order
        assert len(lines) == 4, log[-20000:]
        assert "failed=0" in lines[1] and "changed=0" not in lines[1]
        assert re.search(r"\bchanged=0\b.*\bfailed=0\b", lines[2]), lines[2]
        assert "failed=0" in lines[3]
    model_file = CATALOG["smollm2-135m"].hf_file
    assert [get.path for get in bridge_hub.gets() if get.path.endswith(model_file)], (
        "the model was not pulled from the hub"
    )
