"""Finding repeated pairs in a stream of any length, in memory that does not grow with it.

Pairs are known by a 64-bit hash (`pair_hash`), spilled with their positions to `PARTITIONS` files
and compared one partition at a time; only a one-bit-per-pair bitmap is held. Two pairs colliding
(probability about n^2 / 2^65) would drop one."""

import hashlib
import os
from array import array

import numpy as np

from common.write_errors import writing

PARTITIONS = 64
_SHIFT = np.uint64(64 - (PARTITIONS - 1).bit_length())  # A record's partition: its hash's top bits.
# Records buffered before a spill to the partition files.
_BUFFER = 1 << 16
_RECORD = np.dtype([("hash", "<u8"), ("position", "<u8")])


def pair_hash(line: bytes) -> int:
    """The 64-bit hash a pair is deduplicated by: keyless blake2b of its `english<TAB>foreign` line."""
    return int.from_bytes(hashlib.blake2b(line, digest_size=8).digest(), "little")


class DuplicateFinder:
    """Collects `add(position, hash)` in increasing positions; `finish()` returns the duplicates
    (every repeat after the first; a position never added is never one)."""

    def __init__(self, directory: str):
        self._directory = directory
        os.makedirs(directory, exist_ok=True)
        self._paths = [os.path.join(directory, f"hashes-{index:02d}.bin") for index in range(PARTITIONS)]
        self._hashes, self._positions = array("Q"), array("Q")

    def add(self, position: int, hash_value: int) -> None:
        self._hashes.append(hash_value)
        self._positions.append(position)
        if len(self._hashes) >= _BUFFER:
            self._spill()

    def _spill(self) -> None:
        records = np.empty(len(self._hashes), _RECORD)
        records["hash"] = np.frombuffer(self._hashes, np.uint64)
        records["position"] = np.frombuffer(self._positions, np.uint64)
        partition = (records["hash"] >> _SHIFT).astype(np.intp)
        # A stable sort keeps each partition's records in position order.
        order = np.argsort(partition, kind="stable")
        records, partition = records[order], partition[order]
        bounds = np.searchsorted(partition, np.arange(PARTITIONS + 1))
        for index in np.flatnonzero(np.diff(bounds)):
            with writing(self._paths[index]), open(self._paths[index], "ab") as handle:
                records[bounds[index] : bounds[index + 1]].tofile(handle)
        self._hashes, self._positions = array("Q"), array("Q")

    def finish(self, length: int) -> np.ndarray:
        """The duplicates among positions `[0, length)` as a packed bitmap (`np.packbits` order:
        position p is bit `7 - p % 8` of byte `p // 8`); the partition files are removed."""
        self._spill()
        bitmap = np.zeros((length + 7) // 8, np.uint8)
        for path in self._paths:
            if not os.path.exists(path):
                continue
            records = np.fromfile(path, _RECORD)
            os.remove(path)
            # Records are in position order, so the first index of each hash is its first occurrence.
            _, first = np.unique(records["hash"], return_index=True)
            repeated = np.ones(len(records), bool)
            repeated[first] = False
            positions = records["position"][repeated].astype(np.int64)
            np.bitwise_or.at(bitmap, positions >> 3, (0x80 >> (positions & 7)).astype(np.uint8))
        return bitmap
