"""Authenticated, round-tagged exchange with graph neighbours over `torch.distributed` (gloo, or
nccl between GPUs).

Each round an agent sends one vector to every out-neighbour and receives one from every in-neighbour
by point-to-point send / receive, nothing else. A message carries, per receiver, a 40-byte header
(the round number, then a tag), then the payload. The tag is computed under the link's key for that
direction and this run ([`dpdl.keys.mac_key`][dpdl.keys.mac_key]), by one of three MACs:

- `"aes-gmac"` (default): GMAC (NIST SP 800-38D), the 16-byte tag of AES-256-GCM with the round
  as nonce, the payload as associated data and nothing encrypted. One pass per message at about
  16 GB/s here (AES-NI and carry-less multiplication), faster than a copy.
- `"poly1305"`: the 16-byte Poly1305 tag of the payload (RFC 8439 Section 2.5) under the
  one-time key ChaCha20 derives from the link key with the round as nonce (Section 2.6), as
  ChaCha20-Poly1305 does: about 10 GB/s here, and the fast choice on processors without AES
  instructions. (ChaCha20-Poly1305's own tag over associated data runs at a third of that.)
- `"hmac-sha256"`: `HMAC-SHA256(k, "dpdl" | s | r | round | SHA-256(payload))`; the payload is
  hashed once per round whatever the degree, but SHA-256 runs at about 1 GB/s here, so with large
  models the hashing, not gloo, bounds the rounds per second (`BENCHMARKS.md`).

Tags are compared in constant time. Link keys are fresh for every start of the agents (the handshake
mixes in per-run nonces), so the nonce `round` is never used twice under one key, and a message
recorded in an earlier run does not verify in a resumed one. A message whose round is not the
receiver's (a replay) or whose tag does not verify (forged, altered, sent under another key) raises
[`AuthenticationError`][dpdl.errors.AuthenticationError]; a neighbour that dies or does not answer
within the timeout raises [`PeerFailure`][dpdl.errors.PeerFailure] naming it and the round.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import struct
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch
import torch.distributed as dist
from scipy import sparse

from dpdl.choices import MACS
from dpdl.errors import AuthenticationError, ConfigError, PeerFailure
from dpdl.optional import require

require("cryptography", "runtime", "the peer-to-peer runtime's message tags")
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms  # noqa: E402  (after the check that names the extra)
from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # noqa: E402
from cryptography.hazmat.primitives.poly1305 import Poly1305  # noqa: E402

__all__ = [
    "MACS",
    "NeighbourChannel",
    "message_tag",
    "one_time_key",
    "post",
    "receivers_of",
    "senders_of",
    "wait",
]

_SLOTS = 5  # float64 slots of the header: the round (8 bytes) and the tag field (32 bytes)


def message_tag(
    mac: str,
    key: bytes,
    sender: int,
    receiver: int,
    round_: int,
    payload: np.ndarray,
    digest: bytes = b"",
) -> bytes:
    """The 32-byte tag field of `payload` (any array) sent from `sender` to `receiver` at
    `round_`; `digest`: the payload's SHA-256, where the caller has it (HMAC-SHA256 only)."""
    data = np.ascontiguousarray(payload).view(np.uint8)
    nonce = round_.to_bytes(12, "little")
    if mac == "aes-gmac":
        return AESGCM(key).encrypt(nonce, b"", data) + bytes(
            16
        )  # the 16-byte tag, padded to the field
    if mac == "poly1305":
        return Poly1305.generate_tag(one_time_key(key, nonce), data) + bytes(16)
    digest = digest or hashlib.sha256(data).digest()
    return hmac.digest(
        key, b"dpdl" + struct.pack("<IIq", sender, receiver, round_) + digest, "sha256"
    )


def one_time_key(key: bytes, nonce: bytes) -> bytes:
    """RFC 8439 Section 2.6: the Poly1305 key of one message, the first 32 bytes of the ChaCha20
    block of `key` at counter 0 and the 12-byte `nonce`."""
    return (
        Cipher(algorithms.ChaCha20(key, bytes(4) + nonce), mode=None).encryptor().update(bytes(32))
    )


def _peer_failure(error: RuntimeError, peer: int, round_: int, agent: int) -> PeerFailure:
    """The backend's `error` on an operation with `peer`, as the peer's silence or death."""
    text = str(error).lower()  # gloo: "Timed out waiting ..."; nccl: "... before timing out"
    silent = "timed out" in text or "timing out" in text
    what = "did not answer" if silent else "closed its connection (it died?)"
    when = f"at round {round_}" if round_ else "during the handshake"
    return PeerFailure(f"agent {peer} {what} {when} (seen by agent {agent})", peer, round_)


def wait(work: dist.Work, peer: int, round_: int, agent: int, timeout: datetime.timedelta) -> None:
    """Wait for a point-to-point operation with `peer`; its death or silence is a
    [`PeerFailure`][dpdl.errors.PeerFailure]."""
    try:
        work.wait(timeout=timeout)
    except RuntimeError as error:
        raise _peer_failure(error, peer, round_, agent) from error


def post(
    operation: Callable[[torch.Tensor, int], dist.Work],
    tensor: torch.Tensor,
    peer: int,
    names: tuple[int, int],
    round_: int,
) -> dist.Work:
    """Start `operation` (`dist.isend` or `dist.irecv`) of `tensor` with rank `peer`. Gloo
    raises at once, not at the wait, when the peer has already closed its connection: that too
    is a [`PeerFailure`][dpdl.errors.PeerFailure] (`names`: the peer's and this agent's ids)."""
    try:
        return operation(tensor, peer)
    except RuntimeError as error:
        raise _peer_failure(error, names[0], round_, names[1]) from error


def _nonzero(entries: np.ndarray | sparse.sparray) -> np.ndarray:
    """Positions of the nonzero entries of a row or column of W, dense or sparse, increasing."""
    if sparse.issparse(entries):
        entries = entries.toarray()
    return np.flatnonzero(np.ravel(entries))


def receivers_of(weights: np.ndarray | sparse.csr_array, agent: int) -> list[int]:
    """The agents `agent` sends to: j with `W[j, agent] > 0`, j != agent, in increasing
    order."""
    return [int(j) for j in _nonzero(weights[:, agent]) if j != agent]


def senders_of(weights: np.ndarray | sparse.csr_array, agent: int) -> list[int]:
    """The agents `agent` hears from: j with `W[agent, j] > 0`, j != agent, in increasing
    order."""
    return [int(j) for j in _nonzero(weights[agent]) if j != agent]


class NeighbourChannel:
    """Agent `agent`'s links on the graph of `weights`: it sends to
    [`receivers_of`][dpdl.runtime.channel.receivers_of] and hears from
    [`senders_of`][dpdl.runtime.channel.senders_of]. `send_keys[r]` authenticates messages to r,
    `receive_keys[s]` those from s. Errors call rank r agent `names[r]` (default: r).

    A message of agent s is one float64 tensor, the same for all its receivers: one 40-byte header
    (5 slots) per receiver, in the order of `receivers_of(weights, s)`, then the payload; each
    receiver reads its own header. So the payload is copied once and sent as is to every receiver.

    Messages are built and checked in host buffers. On a GPU `device` (the nccl backend,
    [`dpdl.runtime.backend`][dpdl.runtime.backend]) they travel in device buffers: the outgoing one
    is copied there once per round, each incoming one back to the host before its tag is checked.
    """

    def __init__(
        self,
        agent: int,
        weights: np.ndarray,
        send_keys: Mapping[int, bytes],
        receive_keys: Mapping[int, bytes],
        dim: int,
        timeout: datetime.timedelta,
        mac: str = "aes-gmac",
        names: Sequence[int] | None = None,
        device: torch.device | None = None,
    ) -> None:
        if mac not in MACS:
            raise ConfigError(f"unknown message authentication {mac!r}; known: {', '.join(MACS)}")
        self.agent, self.mac, self.timeout, self.dim = agent, mac, timeout, dim
        self.names = list(names) if names is not None else list(range(len(weights)))
        self.receivers, self.senders = receivers_of(weights, agent), senders_of(weights, agent)
        self.send_keys, self.receive_keys = dict(send_keys), dict(receive_keys)
        self._outbox = torch.empty(_SLOTS * len(self.receivers) + dim, dtype=torch.float64)
        self._inbox = {
            s: torch.empty(_SLOTS * len(receivers_of(weights, s)) + dim, dtype=torch.float64)
            for s in self.senders
        }
        self._slot = {s: _SLOTS * receivers_of(weights, s).index(agent) for s in self.senders}
        on_device = device is not None and device.type != "cpu"
        self._wire_out = self._outbox.to(device) if on_device else self._outbox
        self._wire_in = {
            s: message.to(device) if on_device else message for s, message in self._inbox.items()
        }

    @property
    def outgoing(self) -> np.ndarray:
        """The payload of the next message, `(d,)`: a caller that computes its vector into it
        (`out=`) spares [`exchange`][dpdl.runtime.channel.NeighbourChannel.exchange] a copy."""
        return self._outbox.numpy()[_SLOTS * len(self.receivers) :]

    def exchange(
        self, round_: int, values: np.ndarray, alive: np.ndarray | None = None
    ) -> dict[int, np.ndarray]:
        """Send `values` (d,) to every receiver and return every sender's vector of this round
        (views into the channel's buffers, valid until the next call). `alive`: the ranks that
        take part in the round (None: all), known to every agent before it sends
        ([`dpdl.runtime.dropouts`][dpdl.runtime.dropouts]); the message goes to the alive
        receivers only (its headers keep their slots), and only the alive senders are waited
        for."""
        headers = _SLOTS * len(self.receivers)
        outbox = self._outbox.numpy()
        if not np.may_share_memory(values, outbox):
            outbox[headers:] = values
        data = outbox[headers:].view(np.uint8)
        digest = hashlib.sha256(data).digest() if self.mac == "hmac-sha256" else b""
        receivers = [r for r in self.receivers if alive is None or alive[r]]
        for k, receiver in enumerate(self.receivers):
            if alive is not None and not alive[receiver]:
                continue
            header = struct.pack("<q", round_) + message_tag(
                self.mac, self.send_keys[receiver], self.agent, receiver, round_, data, digest
            )
            outbox[_SLOTS * k : _SLOTS * (k + 1)].view(np.uint8)[:] = np.frombuffer(
                header, np.uint8
            )
        if self._wire_out is not self._outbox:
            self._wire_out.copy_(self._outbox)
        me = self.names[self.agent]
        sends = [
            (r, post(dist.isend, self._wire_out, r, (self.names[r], me), round_)) for r in receivers
        ]
        receives = [
            (sender, post(dist.irecv, message, sender, (self.names[sender], me), round_))
            for sender, message in self._wire_in.items()
            if alive is None or alive[sender]
        ]
        received = {}
        for sender, work in receives:  # each message is verified while the next ones arrive
            wait(work, self.names[sender], round_, self.names[self.agent], self.timeout)
            if self._wire_in[sender] is not self._inbox[sender]:
                self._inbox[sender].copy_(self._wire_in[sender])
            received[sender] = self._verified(sender, round_)
        for receiver, work in sends:
            wait(work, self.names[receiver], round_, self.names[self.agent], self.timeout)
        return received

    def _verified(self, sender: int, round_: int) -> np.ndarray:
        message = self._inbox[sender].numpy()
        slot = self._slot[sender]
        raw = message[slot : slot + _SLOTS].tobytes()
        (stamped,) = struct.unpack("<q", raw[:8])
        if stamped != round_:
            raise AuthenticationError(
                f"agent {self.names[self.agent]} got a message of round {stamped} from agent "
                f"{self.names[sender]} at round {round_} (replayed or out of order)"
            )
        payload = message[len(message) - self.dim :]
        expected = message_tag(
            self.mac, self.receive_keys[sender], sender, self.agent, round_, payload
        )
        if not hmac.compare_digest(expected, raw[8:]):
            raise AuthenticationError(
                f"the message from agent {self.names[sender]} to agent {self.names[self.agent]} "
                f"at round {round_} failed authentication (forged or altered)"
            )
        return payload
