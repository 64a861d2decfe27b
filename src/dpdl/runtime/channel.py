"""Authenticated, round-tagged exchange with graph neighbours over ``torch.distributed`` (gloo).

Each round an agent sends one vector to every out-neighbour and receives one from every
in-neighbour by point-to-point send / receive, nothing else. A message is two tensors: a 40-byte
header (the round number, then a tag) and the float64 payload. The tag is
``HMAC-SHA256(k_{s->r}, "dpdl" | s | r | round | SHA-256(payload))`` under the direction's key
agreed by X25519 (:func:`dpdl.keys.mac_key`): hashing the payload once per round and
MAC-ing its digest per edge costs one pass over the data whatever the degree, and is as strong as
an HMAC over the payload as long as SHA-256 is collision resistant. A message whose round is not
the receiver's (a replay) or whose tag does not verify (forged, altered, sent under another key)
raises :class:`~dpdl.errors.AuthenticationError`; a neighbour that dies or does not answer within
the timeout raises :class:`~dpdl.errors.PeerFailure` naming it and the round.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import struct
from collections.abc import Mapping, Sequence

import numpy as np
import torch
import torch.distributed as dist

from dpdl.errors import AuthenticationError, PeerFailure

__all__ = ["NeighbourChannel", "message_tag", "wait"]

_HEADER = 8 + 32
_HEADER_TAG, _PAYLOAD_TAG = 0, 1


def message_tag(key: bytes, sender: int, receiver: int, round_: int, payload: bytes | memoryview) -> bytes:
    """The 32-byte tag of ``payload`` sent from ``sender`` to ``receiver`` at ``round_``."""
    return _tag_of_digest(key, sender, receiver, round_, hashlib.sha256(payload).digest())


def _tag_of_digest(key: bytes, sender: int, receiver: int, round_: int, digest: bytes) -> bytes:
    return hmac.digest(key, b"dpdl" + struct.pack("<IIq", sender, receiver, round_) + digest, "sha256")


def wait(work: dist.Work, peer: int, round_: int, agent: int, timeout: datetime.timedelta) -> None:
    """Wait for a point-to-point operation with ``peer``; its death or silence is a :class:`PeerFailure`."""
    try:
        work.wait(timeout=timeout)
    except RuntimeError as error:
        what = "did not answer" if "Timed out" in str(error) else "closed its connection (it died?)"
        when = f"at round {round_}" if round_ else "during the handshake"
        raise PeerFailure(f"agent {peer} {what} {when} (seen by agent {agent})", peer, round_) from error


class NeighbourChannel:
    """Agent ``agent``'s links: it sends to ``receivers`` and hears from ``senders``.

    ``send_keys[r]`` authenticates messages to r, ``receive_keys[s]`` those from s.
    """

    def __init__(
        self,
        agent: int,
        receivers: Sequence[int],
        senders: Sequence[int],
        send_keys: Mapping[int, bytes],
        receive_keys: Mapping[int, bytes],
        dim: int,
        timeout: datetime.timedelta,
    ) -> None:
        self.agent = agent
        self.receivers, self.senders = list(receivers), list(senders)
        self.send_keys, self.receive_keys = dict(send_keys), dict(receive_keys)
        self.timeout = timeout
        self._payload = torch.empty(dim, dtype=torch.float64)
        self._inbox = {s: (torch.empty(_HEADER, dtype=torch.uint8), torch.empty(dim, dtype=torch.float64)) for s in self.senders}

    def exchange(self, round_: int, values: np.ndarray) -> dict[int, np.ndarray]:
        """Send ``values`` (d,) to every receiver and return every sender's vector of this round."""
        self._payload.copy_(torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64)))
        digest = hashlib.sha256(self._payload.numpy()).digest()
        headers, pending = [], []
        for receiver in self.receivers:
            tag = _tag_of_digest(self.send_keys[receiver], self.agent, receiver, round_, digest)
            header = torch.frombuffer(bytearray(struct.pack("<q", round_) + tag), dtype=torch.uint8)
            headers.append(header)
            pending += [(receiver, dist.isend(header, receiver, tag=_HEADER_TAG)), (receiver, dist.isend(self._payload, receiver, tag=_PAYLOAD_TAG))]
        for sender, (header, payload) in self._inbox.items():
            pending += [(sender, dist.irecv(header, sender, tag=_HEADER_TAG)), (sender, dist.irecv(payload, sender, tag=_PAYLOAD_TAG))]
        for peer, work in pending:
            wait(work, peer, round_, self.agent, self.timeout)
        return {sender: self._verified(sender, round_) for sender in self.senders}


    def _verified(self, sender: int, round_: int) -> np.ndarray:
        header, payload = self._inbox[sender]
        raw = header.numpy().tobytes()
        (stamped,) = struct.unpack("<q", raw[:8])
        if stamped != round_:
            raise AuthenticationError(f"agent {self.agent} got a message of round {stamped} from agent {sender} at round {round_} (replayed or out of order)")
        expected = message_tag(self.receive_keys[sender], sender, self.agent, round_, payload.numpy())
        if not hmac.compare_digest(expected, raw[8:]):
            raise AuthenticationError(f"the message from agent {sender} to agent {self.agent} at round {round_} failed authentication (forged or altered)")
        return payload.numpy().copy()
