"""BLAKE2b-128 (RFC 7693) in numba: the same digest as ``hashlib.blake2b(digest_size=16)``, inside a kernel.

The passages' exact keys (:mod:`semhash_llm.text.passages`) hash each passage's canonical token
stream in the kernel that cuts it, where ``hashlib`` cannot be called; ``tests/test_passages.py``
checks the digests against ``hashlib.blake2b`` with and without a key and personalisation.
:func:`blake2b_params` gives the initial state for a key and personalisation;
:func:`blake2b_into` hashes a byte buffer with it (inlined into the calling kernel).
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["blake2b_params", "blake2b_into", "bswap64"]

_U64 = np.uint64
_S32 = _U64(32)

_IV = np.array(
    [0x6A09E667F3BCC908, 0xBB67AE8584CAA73B, 0x3C6EF372FE94F82B, 0xA54FF53A5F1D36F1,
     0x510E527FADE682D1, 0x9B05688C2B3E6C1F, 0x1F83D9ABFB41BD6B, 0x5BE0CD19137E2179],
    dtype=np.uint64,
)
_SIGMA = np.array(
    [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
     [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
     [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
     [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
     [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
     [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
     [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
     [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
     [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
     [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0]],
    dtype=np.int64,
)
_R16, _R24, _R63 = _U64(16), _U64(24), _U64(63)
_L1, _L40, _L48 = _U64(1), _U64(40), _U64(48)
_M8 = _U64(0x00FF00FF00FF00FF)
_M16 = _U64(0x0000FFFF0000FFFF)
_S8 = _U64(8)
_S16 = _U64(16)


@nb.njit(inline="always", cache=True)
def _g(v: np.ndarray, a: int, b: int, c: int, d: int, x: np.uint64, y: np.uint64) -> None:
    v[a] = v[a] + v[b] + x
    t = v[d] ^ v[a]
    v[d] = (t >> _S32) | (t << _S32)
    v[c] = v[c] + v[d]
    t = v[b] ^ v[c]
    v[b] = (t >> _R24) | (t << _L40)
    v[a] = v[a] + v[b] + y
    t = v[d] ^ v[a]
    v[d] = (t >> _R16) | (t << _L48)
    v[c] = v[c] + v[d]
    t = v[b] ^ v[c]
    v[b] = (t >> _R63) | (t << _L1)


@nb.njit(inline="always", cache=True)
def _compress(h: np.ndarray, m: np.ndarray, v: np.ndarray, t0: np.uint64, last: bool) -> None:
    for i in range(8):
        v[i] = h[i]
        v[i + 8] = _IV[i]
    v[12] ^= t0
    if last:
        v[14] = ~v[14]
    for r in range(12):
        s = _SIGMA[r % 10]
        _g(v, 0, 4, 8, 12, m[s[0]], m[s[1]])
        _g(v, 1, 5, 9, 13, m[s[2]], m[s[3]])
        _g(v, 2, 6, 10, 14, m[s[4]], m[s[5]])
        _g(v, 3, 7, 11, 15, m[s[6]], m[s[7]])
        _g(v, 0, 5, 10, 15, m[s[8]], m[s[9]])
        _g(v, 1, 6, 11, 12, m[s[10]], m[s[11]])
        _g(v, 2, 7, 8, 13, m[s[12]], m[s[13]])
        _g(v, 3, 4, 9, 14, m[s[14]], m[s[15]])
    for i in range(8):
        h[i] ^= v[i] ^ v[i + 8]


@nb.njit(inline="always", cache=True)
def bswap64(x: np.uint64) -> np.uint64:
    x = ((x & _M8) << _S8) | ((x >> _S8) & _M8)
    x = ((x & _M16) << _S16) | ((x >> _S16) & _M16)
    return (x << _S32) | (x >> _S32)


@nb.njit(inline="always", cache=True)
def blake2b_into(
    buf: np.ndarray, n: int, h0: np.ndarray, key_block: np.ndarray, keyed: bool,
    h: np.ndarray, m: np.ndarray, v: np.ndarray,
) -> None:
    """BLAKE2b of ``buf[:n]`` from the parameter state ``h0``; the state ends in ``h``."""
    for i in range(8):
        h[i] = h0[i]
    t = _U64(0)
    if keyed:
        t = _U64(128)
        _compress(h, key_block, v, t, n == 0)
    elif n == 0:
        for j in range(16):
            m[j] = 0
        _compress(h, m, v, t, True)
    pos = 0
    while pos < n:
        take = min(n - pos, 128)
        if take == 128:
            for j in range(16):
                q = pos + 8 * j
                w = _U64(0)
                for k in range(8):
                    w |= _U64(buf[q + k]) << _U64(8 * k)
                m[j] = w
        else:
            for j in range(16):
                m[j] = 0
            for k in range(take):
                m[k >> 3] |= _U64(buf[pos + k]) << _U64(8 * (k & 7))
        t += _U64(take)
        pos += take
        _compress(h, m, v, t, pos == n)


def blake2b_params(key: bytes | None, person: bytes) -> tuple[np.ndarray, np.ndarray]:
    """The initial state of BLAKE2b-128 (digest size 16, key length, personalisation ``person``,
    at most 16 bytes) and the key block (zeros without a key)."""
    person = person.ljust(16, b"\0")
    h0 = _IV.copy()
    h0[0] ^= np.uint64(0x01010000 | ((len(key) if key else 0) << 8) | 16)
    h0[6] ^= np.uint64(int.from_bytes(person[:8], "little"))
    h0[7] ^= np.uint64(int.from_bytes(person[8:], "little"))
    key_block = np.zeros(16, dtype=np.uint64)
    if key:
        key_block = np.frombuffer(key.ljust(128, b"\0"), dtype="<u8").astype(np.uint64)
    return h0, key_block
