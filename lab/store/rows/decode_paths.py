"""A page of common message_record rows, sealed with a local key, and the three ways the store can
decode it: the compiled path writing Message's slots at their offsets, the compiled path setting
them through PyO3's safe calls, and the Python path (``lab bench decode`` times them).

More: docs/store-internals.md (rows.decode_paths).
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lab.store.rows.records as records
from lab.errors import ValidationError
from lab.store.crypto import Encryptor, LocalKeyStore
from lab.store.rows.model import MessageType
from lab.store.rows.records import PARTITION_ROW_COLUMNS, Message, decode_rows, encode_record

DECODE_PATHS = ("raw", "safe", "python")
_T, _C, _S, _D = (uuid.UUID(int=i) for i in (1, 2, 3, 4))
_PARTITION = (_T, _C, 0)


@dataclass(frozen=True)
class DecodePage:
    """The rows of one page (the history read's shape, without the partition key) and a decoder per path."""

    rows: list[tuple[Any, ...]]
    decoders: dict[str, Callable[[list[Any]], Any]]


def decode_page(size: int, *, body_bytes: int, key_dir: Path) -> DecodePage:
    """``size`` text messages of one conversation sealed with a local key in ``key_dir``; every
    decoder returns the same Messages (the caller checks), or None where the compiled path declines."""
    native = records.NATIVE_DECODER
    if native is None:
        raise ValidationError("lab_native is not installed: `make venv` builds native/", field="native")
    enc = Encryptor(LocalKeyStore(Path(key_dir) / "keys.sqlite"))
    rows = []
    for seq in range(1, size + 1):
        m = Message(tenant_id=_T, conversation_id=_C, seq_bucket=0, conversation_seq=seq, message_id=seq << 70,
                    last_activity_id=(seq << 70) + 1, sender_id=_S, sender_device_id=_D, client_message_id=f"c-{seq}",
                    message_type=MessageType.TEXT, body=bytes(body_bytes), created_at_ms=1_700_000_000_000 + seq)
        cols = vars(encode_record(m, enc))
        rows.append(tuple(cols[name] for name in PARTITION_ROW_COLUMNS))
    keys = records._native_keys(enc)

    def python(page: list[Any]) -> Any:
        saved, records.NATIVE_DECODER = records.NATIVE_DECODER, None
        try:
            return decode_rows(page, enc, partition=_PARTITION)
        finally:
            records.NATIVE_DECODER = saved

    return DecodePage(rows=rows, decoders={
        "raw": lambda page: native.decode(page, _PARTITION, keys, None, False),
        "safe": lambda page: native.decode(page, _PARTITION, keys, None, False, True),
        "python": python})
