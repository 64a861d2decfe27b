"""Secrets without a trusted party: X25519 key agreement (RFC 7748) and HKDF-SHA256 (RFC 5869).

Every seed a noise design needs ([`dpdl.mechanisms.base`][dpdl.mechanisms.base]) is derived here:

- an agent's *private* seed from its own X25519 private key;
- a secret held by two agents (DECOR's and zero-sum noise's `v_ij = -v_ji`) from the pair's
  Diffie-Hellman shared secret, which only the two endpoints can compute;
- a secret held by a larger group (Whisper's seed shared by all, CorN-DSGD's group seeds) is drawn
  by the group's *leader* (its smallest member) from its private key and sent to every other
  member encrypted and authenticated under their pairwise key (ChaCha20-Poly1305), so no third
  party ever sees it. Under the honest-but-curious model of the papers a leader follows the
  protocol; a contributory group key agreement would be needed against a leader who biases it.

Each derivation is labelled with what it is for (HKDF's `info`), so the keys for noise, for message
authentication and for wrapping group seeds are independent. With `key_seed` the private keys are
derived from that number instead of the operating system's randomness: the run is then reproducible
and [`simulated_seed_book`][dpdl.keys.simulated_seed_book] gives the simulation the very seeds the
agents agree on (for checking a deployment against `dpdl train --key-seed`; never for a real
deployment). The public keys are assumed authentic (exchanged through the launcher's rendezvous);
binding them to identities (certificates) is outside dpdl.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import numpy as np

from dpdl.optional import require

require(
    "cryptography", "runtime", "key agreement between agents (the runtime, dpdl train --key-seed)"
)
from cryptography.exceptions import InvalidTag  # noqa: E402  (after the check that names the extra)
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey  # noqa: E402
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305  # noqa: E402
from cryptography.hazmat.primitives.kdf.hkdf import HKDF  # noqa: E402

from dpdl.accounting.noise import GaussianNoise, NoiseSource, SharedSecret, noise_of  # noqa: E402
from dpdl.errors import AuthenticationError, ConfigError  # noqa: E402
from dpdl.mechanisms.base import SeedBook  # noqa: E402

__all__ = [
    "AgentKey",
    "derive",
    "leader",
    "mac_key",
    "pair_secret_seed",
    "simulated_seed_book",
    "unwrap_seed",
    "wrap_seed",
]

_PROTOCOL = b"dpdl/1 "
KEY_BYTES = 32


def derive(material: bytes, label: str) -> bytes:
    """32 bytes of HKDF-SHA256 from `material` for the purpose `label`."""
    return HKDF(
        algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=_PROTOCOL + label.encode()
    ).derive(material)


def _seed(key: bytes) -> np.random.SeedSequence:
    return np.random.SeedSequence(int.from_bytes(key, "big"))


class AgentKey:
    """Agent `agent`'s X25519 key pair and what it derives from it."""

    def __init__(self, agent: int, private: X25519PrivateKey) -> None:
        self.agent = agent
        self._private = private
        self.public = private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self._raw = private.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )

    @classmethod
    def create(cls, agent: int, key_seed: int | None = None, epoch: int = 0) -> AgentKey:
        """A fresh key from the operating system's randomness, or (`key_seed`) a reproducible one;
        `epoch` counts the restarts after departures, each with keys the departed never held."""
        if key_seed is None:
            return cls(agent, X25519PrivateKey.generate())
        if key_seed < 0:
            raise ConfigError(f"key seeds must be integers >= 0, got {key_seed}")
        material = hashlib.sha256(f"dpdl key seed {key_seed}".encode()).digest()
        label = f"agent key {agent}" + (f" epoch {epoch}" if epoch else "")
        return cls(agent, X25519PrivateKey.from_private_bytes(derive(material, label)))

    @classmethod
    def from_private_bytes(cls, agent: int, raw: bytes) -> AgentKey:
        """The key whose raw private bytes are `raw`
        ([`private_bytes`][dpdl.keys.AgentKey.private_bytes]): a key an agent saved at its first
        start, so that a resumed agent draws the noise it drew before."""
        if len(raw) != KEY_BYTES:
            raise ConfigError(f"an agent key has {KEY_BYTES} bytes, got {len(raw)}")
        return cls(agent, X25519PrivateKey.from_private_bytes(raw))

    def private_bytes(self) -> bytes:
        """The raw private key: every seed the agent holds derives from it and its peers' public
        keys. To be kept only where the agent's own checkpoints are."""
        return self._raw

    def private_seed(self) -> np.random.SeedSequence:
        """Seed of the agent's private noise."""
        return _seed(derive(self._raw, "private noise"))

    def pair_key(self, peer: int, peer_public: bytes) -> bytes:
        """The key this agent shares with `peer` (X25519, then HKDF bound to the pair)."""
        if peer == self.agent:
            raise ConfigError(f"agent {peer} cannot agree a pairwise key with itself")
        shared = self._private.exchange(X25519PublicKey.from_public_bytes(peer_public))
        low, high = sorted((self.agent, peer))
        return derive(shared, f"pair {low}-{high}")

    def group_seed(self, secret: int) -> bytes:
        """The seed of shared secret `secret` when this agent leads its group."""
        return derive(self._raw, f"group secret {secret}")


def leader(secret: SharedSecret) -> int:
    """The member that draws a group secret's seed and sends it to the others."""
    return min(secret.holders)


def mac_key(pair_key: bytes, sender: int, receiver: int, session: bytes) -> bytes:
    """Key authenticating messages from `sender` to `receiver` (one per direction) in the run
    whose fresh nonces are `session` (so that no key outlives a start of the agents)."""
    return HKDF(
        algorithm=hashes.SHA256(),
        length=KEY_BYTES,
        salt=session,
        info=_PROTOCOL + f"mac {sender}->{receiver}".encode(),
    ).derive(pair_key)


def pair_secret_seed(pair_key: bytes, secret: int) -> np.random.SeedSequence:
    """Seed of two-holder secret `secret` from its holders' pairwise key."""
    return _seed(derive(pair_key, f"pair secret {secret}"))


def _nonce(secret: int) -> bytes:
    return secret.to_bytes(12, "big")  # one wrapping per secret and pair: the nonce is never reused


def wrap_seed(pair_key: bytes, secret: int, seed: bytes) -> bytes:
    """A group seed encrypted and authenticated for one member (ChaCha20-Poly1305)."""
    return ChaCha20Poly1305(derive(pair_key, "wrap")).encrypt(_nonce(secret), seed, None)


def unwrap_seed(pair_key: bytes, secret: int, wrapped: bytes, sender: int) -> bytes:
    """The group seed from [`wrap_seed`][dpdl.keys.wrap_seed]; a forged or altered one raises
    [`AuthenticationError`][dpdl.errors.AuthenticationError]."""
    try:
        return ChaCha20Poly1305(derive(pair_key, "wrap")).decrypt(_nonce(secret), wrapped, None)
    except InvalidTag as error:
        raise AuthenticationError(
            f"the seed of shared secret {secret} from agent {sender} failed authentication"
        ) from error


def secret_seed(
    secret: int,
    holders: Sequence[int],
    key: AgentKey,
    publics: Mapping[int, bytes],
    group_seed: bytes | None,
) -> np.random.SeedSequence:
    """Seed of shared secret `secret` as holder `key.agent` computes it: from the pairwise key
    for two holders, else from the leader's group seed (`group_seed`, received or its own)."""
    if len(holders) == 2:
        peer = holders[1] if holders[0] == key.agent else holders[0]
        return pair_secret_seed(key.pair_key(peer, publics[peer]), secret)
    if group_seed is None:
        raise ConfigError(
            f"agent {key.agent} needs the group seed of shared secret {secret} from its leader"
        )
    return _seed(group_seed)


def simulated_seed_book(
    source: GaussianNoise | NoiseSource, key_seed: int, epoch: int = 0
) -> SeedBook:
    """Every seed that agents with keys from `key_seed` (and `epoch`) agree on for the noise
    `source` describes (a description, or a mechanism holding one), computed in one process by
    the same derivations the agents run ([`dpdl.runtime.handshake`][dpdl.runtime.handshake])."""
    noise = noise_of(source)
    keys = [AgentKey.create(i, key_seed, epoch) for i in range(noise.n)]
    publics = {i: key.public for i, key in enumerate(keys)}
    secrets = {}
    for k, secret in enumerate(noise.secrets):
        first = keys[secret.holders[0]]
        group = keys[leader(secret)].group_seed(k) if len(secret.holders) != 2 else None
        secrets[k] = secret_seed(k, secret.holders, first, publics, group)
    return SeedBook(key_seed, {i: key.private_seed() for i, key in enumerate(keys)}, secrets)
