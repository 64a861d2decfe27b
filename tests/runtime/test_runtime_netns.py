"""Agents on separate hosts (issue 49, item 6): every agent in its own network namespace, each
joined by a veth pair to a bridge in a hub namespace (the only network these agents share; the
test made all of it, and deletes it even when it fails), the master address that of agent 0's
namespace, not 127.0.0.1. One job meets three faults in turn, on agent `VICTIM`'s link, each
injected once the agents have saved a checkpoint in that start (so mid-run):

- **delay**: `tc netem` where the kernel has it; otherwise (the machine this was written on, and
  its continuous integration, lack `sch_netem`) a token bucket (`tbf rate 1kbit`) on both ends
  of the link: a queue that releases 125 bytes a second, so every packet waits longer than the
  one before (seconds after a few; the test measures it with `ping` and reports it);
- **loss**: 95% of the victim's packets dropped, in and out, by an iptables `statistic` rule
  (skipped, saying so, where iptables or the kernel's netfilter is missing);
- **partition**: the victim's veth taken down.

Each must stop every agent within the timeout (plus exits and checkpoint saving) with one
`dpdl: error:` line naming an agent and the round, the others naming the victim, no traceback and
no hang; the fault is then removed and the agents resume (`run-agent --resume`). After the
third, the resumed job must end with the very models of an uninterrupted run in the same
namespaces. Skipped where namespaces cannot be made (not root, no `ip`, no network namespaces).

What each fault produced is logged: `pytest -o log_cli=true --log-cli-level=INFO` shows it.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from dpdl.errors import ConfigError
from dpdl.runtime.network import choose_interface, interface_address

log = logging.getLogger(__name__)

N = 3  # the complete graph: every agent is the victim's neighbour
VICTIM = 2
TIMEOUT = 2.0  # run-agent --timeout, seconds
STEPS = 400
JOB = [
    "--task", "least-squares", "--graph", "complete", "--n", str(N), "--mechanism", "ldp",
    "--eps", "5", "--steps", str(STEPS), "--key-seed", "5", "--timeout", str(TIMEOUT),
    "--checkpoint-every", "20", "--no-progress",
]  # fmt: skip
DETECT_BOUND = TIMEOUT + 5.0  # the first error: the timeout, and a round's slack on a busy machine
STOP_BOUND = 2 * TIMEOUT + 10.0  # every agent out: those waiting on one that stopped time out too
PHASE_BOUND = 180.0  # a start that has not ended by then hung


def _sh(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, check=check, timeout=30)


def _why_no_namespaces() -> str | None:
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux's"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    if shutil.which("ip") is None:
        return "no `ip` command (Debian: apt-get install iproute2)"
    return None


@dataclass
class Network:
    """Namespaces `hub` (a bridge `br0`, ports `p<k>`) and `agents[k]` (`eth0`, 10.250.0.k+1)."""

    hub: str
    agents: list[str]
    made: list[str] = field(default_factory=list)

    def address(self, k: int) -> str:
        return f"10.250.0.{k + 1}"

    def run(self, namespace: str, *command: str, check: bool = True) -> str:
        return _sh("ip", "netns", "exec", namespace, *command, check=check).stdout


@pytest.fixture
def network() -> Iterator[Network]:
    why = _why_no_namespaces()
    if why:
        pytest.skip(why)
    tag = uuid.uuid4().hex[:8]  # parallel workers get their own namespaces
    net = Network(f"dpdl-hub-{tag}", [f"dpdl-a{k}-{tag}" for k in range(N)])
    try:
        for namespace in [net.hub, *net.agents]:
            made = _sh("ip", "netns", "add", namespace, check=False)
            if made.returncode:
                pytest.skip(f"cannot make a network namespace: {made.stderr.strip()}")
            net.made.append(namespace)
        _sh("ip", "-n", net.hub, "link", "add", "br0", "type", "bridge")
        _sh("ip", "-n", net.hub, "link", "set", "br0", "up")
        for k, namespace in enumerate(net.agents):
            _sh("ip", "link", "add", "eth0", "netns", namespace, "type", "veth", "peer", "name",
                f"p{k}", "netns", net.hub)  # fmt: skip
            _sh("ip", "-n", net.hub, "link", "set", f"p{k}", "master", "br0", "up")
            _sh("ip", "-n", namespace, "addr", "add", f"{net.address(k)}/24", "dev", "eth0")
            _sh("ip", "-n", namespace, "link", "set", "eth0", "up")
            _sh("ip", "-n", namespace, "link", "set", "lo", "up")
        yield net
    finally:
        for namespace in net.made:  # deleting a namespace deletes its veth ends and rules
            _sh("ip", "netns", "del", namespace, check=False)


# -- faults: each returns how to undo it, or a reason it cannot be made here ------------------


Fault = Callable[[Network], "Callable[[], None] | str"]


def _delay(net: Network) -> Callable[[], None] | str:
    ends = [(net.agents[VICTIM], "eth0"), (net.hub, f"p{VICTIM}")]
    shape = ["netem", "delay", f"{2 * TIMEOUT:g}s"]
    how = f"netem delay {2 * TIMEOUT:g} s each way"
    if _sh(
        *_in(ends[0][0]), "tc", "qdisc", "add", "dev", "eth0", "root", *shape, check=False
    ).returncode:
        shape = ["tbf", "rate", "1kbit", "burst", "400", "limit", "100000"]
        how = "no sch_netem in this kernel: tbf rate 1kbit burst 400 b each way"
        made = _sh(
            *_in(ends[0][0]), "tc", "qdisc", "add", "dev", "eth0", "root", *shape, check=False
        )
        if made.returncode:
            return f"neither netem nor tbf: {made.stderr.strip()}"
    _sh(*_in(ends[1][0]), "tc", "qdisc", "add", "dev", ends[1][1], "root", *shape)
    log.info("delay: %s", how)

    def undo() -> None:
        for namespace, device in ends:  # afresh, without the agents' backlog, for the ping
            _sh(*_in(namespace), "tc", "qdisc", "replace", "dev", device, "root", "pfifo")
            _sh(*_in(namespace), "tc", "qdisc", "replace", "dev", device, "root", *shape)
        log.info("delay measured on the idle link: %s", _ping(net, 4, 0.5, 8, each=True))
        for namespace, device in ends:
            _sh(*_in(namespace), "tc", "qdisc", "del", "dev", device, "root")

    return undo


def _loss(net: Network) -> Callable[[], None] | str:
    if shutil.which("iptables") is None:
        return "no iptables (Debian: apt-get install iptables)"
    rules = [
        [chain, "-m", "statistic", "--mode", "random", "--probability", "0.95", "-j", "DROP"]
        for chain in ("INPUT", "OUTPUT")
    ]
    for rule in rules:
        made = _sh(*_in(net.agents[VICTIM]), "iptables", "-A", *rule, check=False)
        if made.returncode:
            return f"iptables cannot drop here (no netfilter?): {made.stderr.strip()}"
    log.info("loss: iptables statistic --mode random --probability 0.95 DROP, in and out")

    def undo() -> None:
        log.info("loss measured after detection: %s", _ping(net, 50, 0.02, 1))
        for rule in rules:
            _sh(*_in(net.agents[VICTIM]), "iptables", "-D", *rule)

    return undo


def _partition(net: Network) -> Callable[[], None]:
    _sh("ip", "-n", net.hub, "link", "set", f"p{VICTIM}", "down")
    log.info("partition: the hub's end of agent %d's veth down", VICTIM)

    def undo() -> None:
        log.info("partition measured after detection: %s", _ping(net, 3, 0.2, 1))
        _sh("ip", "-n", net.hub, "link", "set", f"p{VICTIM}", "up")

    return undo


def _in(namespace: str) -> tuple[str, ...]:
    return ("ip", "netns", "exec", namespace)


def _ping(net: Network, count: int, interval: float, deadline: float, each: bool = False) -> str:
    """Agent 0 pinging the victim (`count` packets of 128 bytes, `interval` s apart, for at
    most `deadline` s): the loss and the round-trip times (`each`: of every reply)."""
    if shutil.which("ping") is None:
        return "not measured (no ping: apt-get install iputils-ping)"
    out = net.run(net.agents[0], "ping", "-n", "-c", str(count), "-i", str(interval), "-s", "100",
                  "-w", str(deadline), net.address(VICTIM), check=False)  # fmt: skip
    lines = [line for line in out.splitlines() if "packet" in line or "rtt" in line]
    if each:
        lines.insert(0, "round trips " + ", ".join(re.findall(r"time=(\S+ ms)", out)))
    return "; ".join(lines)


# -- a start of the job -----------------------------------------------------------------------


@dataclass
class Outcome:
    codes: list[int]
    errors: list[str]  # each agent's last line of stderr
    stderr: list[str]
    detected_after: float | None  # seconds from the fault to the first agent's error
    stopped_after: float | None  # seconds from the fault to the last agent's exit


def _start(net: Network, workdir: Path, resume: bool, fault: Fault | None) -> Outcome | str:
    """Start the N agents (one per namespace, master agent 0), inject `fault` once the agents
    have saved a checkpoint in this start, wait for all, undo the fault; a string: the fault
    cannot be made here."""
    port = 20000 + uuid.uuid4().int % 20000
    logs = [workdir.parent / f"{workdir.name}-{k}-{uuid.uuid4().hex[:6]}.log" for k in range(N)]
    periodic = workdir / "agent0" / "periodic.ckpt"
    started = time.time()
    processes = []
    for k in range(N):
        env = {
            **os.environ,
            "RANK": str(k),
            "WORLD_SIZE": str(N),
            "MASTER_ADDR": net.address(0),
            "MASTER_PORT": str(port),
            "TORCH_CPP_LOG_LEVEL": "ERROR",
        }
        command = [*_in(net.agents[k]), sys.executable, "-m", "dpdl.cli", "run-agent", *JOB,
                   "--workdir", str(workdir), *(["--resume"] if resume else [])]  # fmt: skip
        with logs[k].open("w") as log:
            processes.append(subprocess.Popen(command, env=env, stdout=log, stderr=log))
    undo, injected, exits, error = None, None, [None] * N, None
    try:
        deadline = time.monotonic() + PHASE_BOUND
        while None in exits and time.monotonic() < deadline:
            if fault is not None and undo is None and _saved_since(periodic, started):
                undo = fault(net)
                if isinstance(undo, str):
                    return undo
                injected = time.monotonic()
            for k, process in enumerate(processes):
                if exits[k] is None and process.poll() is not None:
                    exits[k] = time.monotonic()
            if injected is not None and error is None and any(_erred(path) for path in logs):
                error = time.monotonic()
            time.sleep(0.02)
        assert None not in exits, f"agents still running {PHASE_BOUND:g} s after their start"
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        if callable(undo):
            undo()
    stderr = [log.read_text() for log in logs]
    last = [text.strip().splitlines()[-1] if text.strip() else "" for text in stderr]
    return Outcome(
        [p.returncode for p in processes],
        last,
        stderr,
        None if injected is None else (error or max(exits)) - injected,
        None if injected is None else max(exits) - injected,
    )


def _erred(path: Path) -> bool:
    return "dpdl: error:" in path.read_text()


def _saved_since(path: Path, started: float) -> bool:
    try:
        return path.stat().st_mtime >= started
    except FileNotFoundError:
        return False


def _finished(outcome: Outcome | str) -> None:
    assert isinstance(outcome, Outcome)
    assert outcome.codes == [0] * N, outcome.stderr


FAILURE = re.compile(
    r"^dpdl: error: agent (\d+) (did not answer|closed its connection \(it died\?\)) at round "
    r"(\d+) \(seen by agent (\d+)\)$"
)


def test_agents_in_separate_namespaces_detect_delay_loss_and_a_partition_and_resume(
    network: Network, tmp_path: Path
) -> None:
    reference = tmp_path / "uninterrupted"
    _finished(_start(network, reference, resume=False, fault=None))
    workdir, resume = tmp_path / "faulted", False
    faults: list[tuple[str, Fault]] = [
        ("delay", _delay),
        ("loss", _loss),
        ("partition", _partition),
    ]
    for name, fault in faults:
        outcome = _start(network, workdir, resume, fault)
        if isinstance(outcome, str):
            log.warning("%s: skipped: %s", name, outcome)
            resume = True  # the agents were stopped after a periodic checkpoint
            continue
        assert outcome.detected_after is not None, f"{name}: the job ended before the fault"
        assert not any("Traceback" in text for text in outcome.stderr), outcome.stderr
        assert outcome.codes == [2] * N, (name, outcome.codes, outcome.stderr)
        seen = [FAILURE.match(line) for line in outcome.errors]
        assert all(seen), (name, outcome.errors)
        rounds = {int(match.group(3)) for match in seen}
        # the others' first errors name the victim (later ones name agents that stopped first)
        others = [(int(m.group(3)), int(m.group(1))) for m in seen if int(m.group(4)) != VICTIM]
        first = min(others)[0]
        assert {agent for round_, agent in others if round_ == first} == {VICTIM}, outcome.errors
        assert outcome.detected_after <= DETECT_BOUND, (name, outcome.detected_after)
        assert outcome.stopped_after <= STOP_BOUND, (name, outcome.stopped_after)
        log.info(
            "%s: first error %.1f s after the fault (timeout %g s), every agent stopped after "
            "%.1f s, rounds %s:\n  %s",
            name,
            outcome.detected_after,
            TIMEOUT,
            outcome.stopped_after,
            sorted(rounds),
            "\n  ".join(outcome.errors),
        )
        resume = True
    _finished(_start(network, workdir, resume=True, fault=None))
    for k in range(N):
        expected = np.load(reference / f"agent{k}" / "final.npy")
        resumed = np.load(workdir / f"agent{k}" / "final.npy")
        assert np.array_equal(resumed, expected), k
    log.info(
        "resumed: the %d final models equal the uninterrupted run's bit for bit (agent 0: %s...)",
        N,
        np.round(np.load(workdir / "agent0" / "final.npy")[:4], 6).tolist(),
    )


# -- the interface an agent's sockets use (no root needed) -----------------------------------


def test_an_agent_uses_the_interface_that_routes_to_a_remote_master(monkeypatch) -> None:
    monkeypatch.setattr(os, "environ", dict(os.environ))  # whatever is set, undone after
    os.environ.pop("GLOO_SOCKET_IFNAME", None)
    os.environ.pop("NCCL_SOCKET_IFNAME", None)
    assert choose_interface("127.0.0.1", 29500, None) is None  # one machine: gloo's own choice
    assert "GLOO_SOCKET_IFNAME" not in os.environ
    remote = [
        (name, address)
        for _, name in socket.if_nameindex()
        if (address := interface_address(name)) and not address.startswith("127.")
    ]
    if not remote:
        pytest.skip("this host has no IPv4 interface besides loopback")
    name, address = remote[0]
    assert choose_interface(address, 29500, None) == name
    assert os.environ["GLOO_SOCKET_IFNAME"] == name
    assert os.environ["NCCL_SOCKET_IFNAME"] == f"={name}"


def test_an_interface_that_does_not_exist_is_refused_naming_it(monkeypatch) -> None:
    monkeypatch.setattr(os, "environ", {**os.environ, "GLOO_SOCKET_IFNAME": "eth9"})
    with pytest.raises(ConfigError, match="--interface nosuch0: no such network interface"):
        choose_interface("10.1.2.3", 29500, "nosuch0")
    assert choose_interface("127.0.0.1", 29500, "lo") == "lo"  # named: used even on loopback
    assert os.environ["GLOO_SOCKET_IFNAME"] == "lo"  # and over the variable
