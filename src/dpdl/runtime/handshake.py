"""The setup phase of a runtime agent: keys, agreement on the design, seeds and link keys.

1. Every agent publishes its X25519 public key and a fresh 16-byte nonce (one all-gather).
2. Every agent computes the mixing matrix and the noise covariance from the public configuration
   and publishes a SHA-256 of them; agents that disagree (other software, other options) stop
   with an error naming them, before any noise is drawn.
3. Seeds: private and two-holder seeds are derived locally ([`dpdl.keys`][dpdl.keys]); the leader
   of every larger group sends each member the group's seed, encrypted for that member.
4. Every graph link gets one message-authentication key per direction, from the pair's key and
   both ends' nonces: new in every run, resumed ones included.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from functools import partial

import torch
import torch.distributed as dist

from dpdl.errors import ConfigError
from dpdl.jobspec.job import Job
from dpdl.keys import KEY_BYTES, AgentKey, leader, mac_key, secret_seed, unwrap_seed, wrap_seed
from dpdl.mechanisms.base import SeedBook
from dpdl.runtime.channel import post, receivers_of, senders_of, wait

__all__ = ["Links", "handshake"]

_WRAPPED = KEY_BYTES + 16  # ChaCha20-Poly1305 adds a 16-byte tag
_NONCE = 16  # fresh per start of an agent: its links' message keys are new in every run
_SEED_TAG = 1000  # point-to-point tags of the setup phase, apart from the rounds' (0 and 1)


@dataclass(frozen=True)
class Links:
    """What an agent holds after the handshake: its seeds and its links' keys."""

    seeds: SeedBook
    receivers: list[int]
    senders: list[int]
    send_keys: dict[int, bytes]
    receive_keys: dict[int, bytes]


def _all_gather_bytes(data: bytes, world: int) -> list[bytes]:
    mine = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    gathered = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(gathered, mine)
    return [t.numpy().tobytes() for t in gathered]


def handshake(
    agent: int,
    key: AgentKey,
    job: Job,
    timeout: datetime.timedelta,
    names: list[int] | None = None,
) -> Links:
    """Run the setup phase for `agent` (collective: every agent of the process group calls it):
    the agents compare the job's [`design_digest`][dpdl.jobspec.job.Job.design_digest], then
    agree the seed of every secret of the job's noise as plain data
    ([`noise_seeds`][dpdl.jobspec.job.Job.noise_seeds]) among its holders. A group leader silent
    for `timeout` is a [`PeerFailure`][dpdl.errors.PeerFailure]. Errors call rank r agent
    `names[r]` (default: r)."""
    weights, noise = job.weights, job.noise_seeds
    names = names if names is not None else list(range(len(weights)))
    world = dist.get_world_size()
    announced = _all_gather_bytes(key.public + os.urandom(_NONCE), world)
    publics = {i: data[:KEY_BYTES] for i, data in enumerate(announced)}
    nonces = {i: data[KEY_BYTES:] for i, data in enumerate(announced)}
    digests = _all_gather_bytes(job.design_digest(), world)
    disagree = [i for i, digest in enumerate(digests) if digest != digests[agent]]
    if disagree:
        raise ConfigError(
            f"agent {names[agent]} computed another mixing matrix or noise covariance than agents "
            f"{[names[i] for i in disagree]}: "
            "same dpdl version and options everywhere?"
        )

    pair_keys: dict[int, bytes] = {}

    def pair(peer: int) -> bytes:
        if peer not in pair_keys:
            pair_keys[peer] = key.pair_key(peer, publics[peer])
        return pair_keys[peer]

    secrets, sends, receives = {}, [], {}
    for k in noise.secrets_of(agent):
        holders = noise.secrets[k].holders
        if len(holders) != 2 and leader(noise.secrets[k]) == agent:
            seed = key.group_seed(k)
            for member in holders:
                if member != agent:
                    wrapped = torch.frombuffer(
                        bytearray(wrap_seed(pair(member), k, seed)), dtype=torch.uint8
                    )
                    send = partial(dist.isend, tag=_SEED_TAG + k)
                    names_ = (names[member], names[agent])
                    sends.append((member, wrapped, post(send, wrapped, member, names_, 0)))
            secrets[k] = secret_seed(k, holders, key, publics, seed)
        elif len(holders) != 2:
            buffer = torch.empty(_WRAPPED, dtype=torch.uint8)
            source = leader(noise.secrets[k])
            receive = partial(dist.irecv, tag=_SEED_TAG + k)
            receives[k] = (
                buffer,
                post(receive, buffer, source, (names[source], names[agent]), 0),
            )
        else:
            secrets[k] = secret_seed(k, holders, key, publics, None)
    for member, _, work in sends:
        wait(work, names[member], 0, names[agent], timeout)
    for k, (buffer, work) in receives.items():
        source = leader(noise.secrets[k])
        wait(work, names[source], 0, names[agent], timeout)
        group_seed = unwrap_seed(pair(source), k, buffer.numpy().tobytes(), names[source])
        secrets[k] = secret_seed(k, noise.secrets[k].holders, key, publics, group_seed)

    receivers, senders = receivers_of(weights, agent), senders_of(weights, agent)
    return Links(
        seeds=SeedBook(-1, {agent: key.private_seed()}, secrets),
        receivers=receivers,
        senders=senders,
        send_keys={j: mac_key(pair(j), agent, j, nonces[agent] + nonces[j]) for j in receivers},
        receive_keys={j: mac_key(pair(j), j, agent, nonces[j] + nonces[agent]) for j in senders},
    )
