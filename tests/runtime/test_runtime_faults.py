"""Runtime faults on loopback, with bounded waits: a frozen agent, a dead launcher, two jobs in one
working folder, a resume with another setting, and a resume from nothing (issue 25, item 4)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from dpdl.errors import ConfigError, FileFormatError, PeerFailure
from dpdl.experiments.train import TrainConfig
from dpdl.files import folder_lock
from dpdl.runtime import AgentOptions, run_agent, run_local
from dpdl.runtime.channel import post
from dpdl.runtime.launch import agent_error_path, spawn_agents, watch_agents

HERE = Path(__file__).resolve().parent
KEY_SEED = 5
CONFIG = TrainConfig(
    task="least-squares", graph="ring", n=4, mechanism="ldp", eps=5.0, steps=30, key_seed=KEY_SEED
)


def _freezing_agent(agent: int, options: AgentOptions, victim: int, round_: int) -> None:
    def on_round(t: int) -> None:
        if agent == victim and t == round_:
            os.kill(os.getpid(), signal.SIGSTOP)  # frozen: alive, silent, deaf to SIGTERM

    run_agent(CONFIG, 0, agent, options, on_round=on_round)


def test_a_frozen_agent_ends_the_whole_job_naming_it_and_its_round(tmp_path: Path) -> None:
    options = AgentOptions(tmp_path, key_seed=KEY_SEED, timeout=3.0, checkpoint_every=10)
    agents = spawn_agents(4, tmp_path, _freezing_agent, options, 2, 12)
    try:
        stopped = watch_agents(agents, grace=2.0)
    finally:
        agents.close()
    assert all(process.exitcode is not None for process in agents.processes)
    errors = {r: agent_error_path(tmp_path, r) for r in range(4)}
    seen = [errors[r].read_text() for r in (1, 3) if errors[r].is_file()]
    assert any("agent 2 did not answer at round 13" in text for text in seen), seen
    # the frozen agent was woken to stop (it saves its last states) or, failing that, killed
    assert 2 in stopped and "after rank" in stopped[2]


def _forever(agent: int) -> None:
    while True:
        time.sleep(0.1)


LAUNCHER = """
import sys, time
sys.path.insert(0, {tests!r})
from pathlib import Path
from dpdl.runtime.launch import spawn_agents
from test_runtime_faults import _forever
agents = spawn_agents(3, Path({workdir!r}), _forever)
time.sleep(2)
print(" ".join(str(p.pid) for p in agents.processes), flush=True)
time.sleep(600)
"""


def _gone(pid: int) -> bool:
    """No such process, or a zombie (exited, not yet reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_agents_exit_when_their_launcher_dies(tmp_path: Path) -> None:
    script = LAUNCHER.format(tests=str(HERE), workdir=str(tmp_path))
    launcher = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(pid) for pid in launcher.stdout.readline().split()]
        assert len(pids) == 3 and not any(_gone(pid) for pid in pids)
        launcher.kill()  # SIGKILL: no clean-up in the launcher at all
        launcher.wait(timeout=30)
        deadline = time.monotonic() + 30
        while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert all(_gone(pid) for pid in pids), "orphaned agents still run"
    finally:
        launcher.kill()


@contextlib.contextmanager
def _held_elsewhere(folder: Path) -> Iterator[int]:
    """`folder`'s lock held by another process (its id) for the duration: the thread that holds a
    lock may take it again, so another job is another process."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from dpdl.files import folder_lock\n"
            f"with folder_lock({str(folder)!r}):\n    print('held', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait(timeout=30)


def test_a_second_job_in_a_working_folder_in_use_is_refused(tmp_path: Path) -> None:
    options = AgentOptions(tmp_path, key_seed=KEY_SEED)
    with (
        _held_elsewhere(tmp_path) as pid,
        pytest.raises(ConfigError, match=rf"in use by another dpdl job \(process {pid}\)"),
    ):
        run_local(CONFIG, 0, options)
    with (
        _held_elsewhere(tmp_path / "agent1"),
        pytest.raises(ConfigError, match=r"agent1 is in use by another dpdl agent 1 \(process"),
    ):
        run_agent(CONFIG, 0, 1, options)
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        run_local(CONFIG, 0, replace(options, workdir=tmp_path / "file"))


def test_the_thread_that_holds_a_lock_may_take_it_again_and_another_thread_may_not(
    tmp_path: Path,
) -> None:
    refused: list[BaseException] = []

    def other() -> None:
        try:
            with folder_lock(tmp_path):
                pass
        except ConfigError as error:
            refused.append(error)

    with folder_lock(tmp_path), folder_lock(tmp_path):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert len(refused) == 1 and f"process {os.getpid()}" in str(refused[0])
    with folder_lock(tmp_path):  # released with the outer hold
        pass


def test_a_lock_dies_with_its_holder(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from dpdl.files import folder_lock\n"
            f"with folder_lock({str(tmp_path)!r}):\n    print('held', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=rf"process {holder.pid}\)"), folder_lock(tmp_path):
            pass
    finally:
        holder.kill()
        holder.wait(timeout=30)
    with folder_lock(tmp_path):  # the operating system released it with its holder
        pass


def test_a_resume_with_another_setting_names_it_and_a_resume_from_nothing_says_so(
    tmp_path: Path,
) -> None:
    options = AgentOptions(tmp_path, key_seed=KEY_SEED, checkpoint_every=10)
    nothing = run_local(CONFIG, 0, replace(options, resume=True))
    assert nothing.models is None
    assert all("nothing to resume" in error for error in nothing.errors.values())
    assert run_local(CONFIG, 0, options).errors == {}
    # refused once, by the launcher, before any agent starts, naming what differs
    with pytest.raises(FileFormatError) as refused:
        run_local(replace(CONFIG, eps=6.0, lr=0.05), 0, replace(options, resume=True))
    message = str(refused.value)
    assert "other settings (eps was 5.0 and is 6.0; lr was" in message, message
    assert "another --workdir" in message and "not the layout" not in message, message
    assert not agent_error_path(tmp_path, 0).exists()


def _failing_agent(rank: int) -> None:
    from tqdm.auto import tqdm

    tqdm(total=3, disable=True)  # as an agent's progress bar, before it fails
    raise RuntimeError(f"agent {rank} failed")


FAILING_LAUNCHER = """
import sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from dpdl.runtime.launch import spawn_agents, watch_agents
from test_runtime_faults import _failing_agent
agents = spawn_agents(2, Path({workdir!r}), _failing_agent)
watch_agents(agents, grace=2.0)
agents.close()
print("dpdl: error: the launcher's last line", file=sys.stderr)
"""


def test_a_failed_run_leaks_no_semaphore_after_the_launchers_last_line(tmp_path: Path) -> None:
    script = FAILING_LAUNCHER.format(tests=str(HERE), workdir=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert "leaked semaphore" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "dpdl: error: the launcher's last line"
    assert "agent 0 failed" in agent_error_path(tmp_path, 0).read_text()


def test_a_run_that_diverges_stops_every_agent_naming_the_round(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A step size of 1e308 (issue 49): the agents stop on their own at the round their values
    stop being finite (no timeout, no agent killed), `run-local` exits 3 naming the round and the
    cause, writes FAILED.json and no final.json, and refuses `--resume` of the folder."""
    from dpdl.cli import main

    work = tmp_path / "work"
    args = ["run-local", "--task", "quadratic", "--graph", "ring", "--n", "3", "--steps", "5"]
    args += ["--lr", "1e308", "--no-progress", "--timeout", "60"]
    args += ["--workdir", str(work)]
    began = time.monotonic()
    assert main(args) == 3
    stderr = capsys.readouterr().err
    assert time.monotonic() - began < 60, "an agent waited for a timeout"
    errors = [line for line in stderr.splitlines() if line.startswith("dpdl: error:")]
    assert len(errors) == 1 and "step " in errors[0] and "step size" in errors[0], stderr
    assert "was stopped by the launcher" not in stderr, stderr
    assert not (work / "final.json").exists()
    assert '"step": ' in (work / "FAILED.json").read_text()
    assert main([*args, "--resume"]) == 2
    assert "FAILED.json" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("message", "what"),
    [
        (
            "[pair.cc:561] Connection closed by peer [10.250.0.1]:27542",
            "closed its connection (it died?)",
        ),
        ("Timed out waiting 5000ms for send operation to complete", "did not answer"),
    ],
)
def test_an_operation_the_backend_refuses_at_once_is_the_peers_failure(
    message: str, what: str
) -> None:
    """Gloo raises at `isend` itself, not at the wait, when the peer has already closed its
    connection: that is the peer's failure, named with its round, not an internal error."""

    def refused(tensor: torch.Tensor, peer: int) -> None:
        raise RuntimeError(message)

    with pytest.raises(PeerFailure) as caught:
        post(refused, torch.zeros(1), 2, (7, 4), 26)
    assert str(caught.value) == f"agent 7 {what} at round 26 (seen by agent 4)"
    assert (caught.value.agent, caught.value.round) == (7, 26)
