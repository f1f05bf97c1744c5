"""Deterministic workload datasets: message profiles, conversation shapes, seq holes.

A *profile* (``datasets/profiles/<name>.toml``, documented in ``datasets/README.md``) says what
a message population looks like: message types and body sizes, media thumbnails (inlined in
media_metadata, <= 32 KiB), mentions, replies, the E2EE share, direct chats and groups of up to
1000 members whose message-weighted recipients average R_avg ~= 22 (design §7), the mix of
retention classes, and conversation_seq holes left by writers that crashed inside their
reservation window of 4096 values (§6.3, S-3).

:func:`generate` turns (profile, size, seed) into three tables with one numpy ``Generator``:
``messages`` (one row per message: coordinates, sizes, flags, a per-row ``content_seed``),
``conversations`` and ``holes``. Bodies, thumbnails and mention lists are *not* stored: they
are materialised from ``content_seed`` on demand (:func:`body_for`, :func:`media_for`,
:func:`mentions_for`), so a 200 000-message media dataset stays a few MB of Parquet and the
same row always yields the same bytes. :func:`save` writes Parquet files plus
``manifest.json`` (profile, seed, size, counts, sha256 of each file); same inputs, same hashes.

Rows become the store's inputs with :func:`to_message` (a ``lab.store.records.Message`` for bulk
loads that bypass the write path) or :func:`to_send_request` (``lab.store.SendRequest``; the
store then allocates conversation_seq itself, so dataset holes do not carry over).
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import math
import tomllib
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lab.constants import Constants
from lab.errors import ConfigError, ValidationError
from lab.measure import percentile
from lab.project import DATASETS_OUT_DIR
from lab.results.jsonio import write_json
from lab.store.model import MessageType, RetentionClass

_DEFAULTS = Constants.appendix_b()

GENERATOR_VERSION = 1  # bump when the same (profile, seed, size) would produce other rows
PROFILES_DIR = Path(__file__).with_name("profiles")
DEFAULT_OUT_DIR = DATASETS_OUT_DIR
SIZES = ("quick", "full")

TYPE_ORDER = (MessageType.TEXT, MessageType.IMAGE, MessageType.VIDEO, MessageType.AUDIO, MessageType.FILE,
              MessageType.CUSTOM)
RETENTION_ORDER = (RetentionClass.DEFAULT, RetentionClass.EPHEMERAL_24H, RetentionClass.COMPLIANCE_HOLD,
                   RetentionClass.TENANT_CUSTOM)
_MEDIA_TYPES = (MessageType.IMAGE, MessageType.VIDEO, MessageType.AUDIO, MessageType.FILE)
_THUMB_TYPES = (MessageType.IMAGE, MessageType.VIDEO)
_MIME = {MessageType.IMAGE: "image/jpeg", MessageType.VIDEO: "video/mp4", MessageType.AUDIO: "audio/ogg",
         MessageType.FILE: "application/pdf"}
# Object sizes in the store's media backend (log-normal median bytes, sigma): metadata only.
_OBJECT_SIZE = {MessageType.IMAGE: (400_000, 0.8), MessageType.VIDEO: (8_000_000, 1.0),
                MessageType.AUDIO: (300_000, 0.7), MessageType.FILE: (1_000_000, 1.5)}
_DURATION_MS = {MessageType.VIDEO: (20_000, 0.9), MessageType.AUDIO: (15_000, 0.8)}
_DIMENSIONS = ((1280, 720), (1920, 1080), (1080, 1350), (720, 1280), (640, 480))
_CUSTOM_TYPES = ("poll", "card", "location")
E2EE_OVERHEAD_BYTES = 28      # sender-key header + MAC of the client's ciphertext
E2EE_MEDIA_KEY_BYTES = 64     # E2EE media: key + digest travel inside the ciphertext body
BLURHASH_CHARS = 28
CHECKSUM_BYTES = 32
# Chat traffic by hour of day (UTC), a two-hump day: quiet night, peaks at noon and evening.
_DIURNAL = np.array([2, 1, 1, 1, 1, 2, 3, 5, 7, 8, 8, 9, 10, 9, 8, 8, 8, 9, 10, 10, 9, 7, 5, 3], dtype=float)
_VOCAB = ("ok yes no the a to and of you i it in is that for on this we be have are with just not so but "
          "what can will see lol thanks meeting tomorrow today later call send file photo here there "
          "good great sure sounds fine let me know when where who how why please sorry again done").split()


# ---- profiles -------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class ConversationShape:
    tenants: int = 4
    messages_per_conversation_mean: float = 40.0
    group_share: float = 0.25
    group_members_median: float = 24.0
    group_members_sigma: float = 1.1
    group_members_max: int = 1000
    activity_sigma: float = 1.0
    group_activity_exponent: float = 0.3
    r_avg_target: float = 22.0
    e2ee_direct_share: float = 0.15
    e2ee_group_share: float = 0.02
    devices_per_user_max: int = 3


@dataclass(frozen=True, kw_only=True)
class MessageMix:
    text: float = 0.78
    image: float = 0.12
    video: float = 0.03
    audio: float = 0.03
    file: float = 0.02
    custom: float = 0.02
    text_bytes_median: float = 48.0
    text_bytes_sigma: float = 1.0
    text_bytes_max: int = 4096
    caption_share: float = 0.25
    caption_bytes_median: float = 30.0
    thumbnail_bytes_median: float = 6000.0
    thumbnail_bytes_sigma: float = 0.6
    thumbnail_bytes_max: int = _DEFAULTS.media_thumbnail_max_bytes
    custom_bytes_median: float = 200.0
    mention_share: float = 0.06
    mention_all_share: float = 0.005
    mention_count_mean: float = 1.5
    reply_share: float = 0.08
    reply_distance_mean: float = 6.0

    def type_weights(self) -> np.ndarray:
        w = np.array([self.text, self.image, self.video, self.audio, self.file, self.custom], dtype=float)
        if (w < 0).any() or w.sum() <= 0:
            raise ConfigError("message type weights must be >= 0 and not all 0", weights=w.tolist())
        return w / w.sum()


@dataclass(frozen=True, kw_only=True)
class HoleModel:
    window: int = _DEFAULTS.seq_reservation_window
    crash_probability: float = 0.005
    repeat_probability: float = 0.35


@dataclass(frozen=True, kw_only=True)
class Profile:
    """One workload profile; see ``datasets/README.md`` for every field."""

    name: str
    description: str = ""
    sizes: Mapping[str, int] = field(default_factory=lambda: {"quick": 2000, "full": 200_000})
    start: str = "2026-09-01T00:00:00Z"
    days: float = 28.0
    conversations: ConversationShape = field(default_factory=ConversationShape)
    retention: Mapping[str, float] = field(default_factory=lambda: {"default": 1.0})
    messages: MessageMix = field(default_factory=MessageMix)
    holes: HoleModel = field(default_factory=HoleModel)
    source_sha256: str = ""

    @property
    def start_ms(self) -> int:
        return int(_dt.datetime.fromisoformat(self.start.replace("Z", "+00:00")).timestamp() * 1000)

    def retention_weights(self) -> np.ndarray:
        names = [r.name.lower() for r in RETENTION_ORDER]
        unknown = sorted(set(self.retention) - set(names))
        if unknown:
            raise ConfigError(f"profile {self.name}: unknown retention classes {unknown}", profile=self.name)
        w = np.array([float(self.retention.get(n, 0.0)) for n in names])
        if (w < 0).any() or w.sum() <= 0:
            raise ConfigError(f"profile {self.name}: retention weights must be >= 0 and not all 0")
        return w / w.sum()

    def size(self, size: str | int) -> int:
        if isinstance(size, str):
            if size not in self.sizes:
                raise ValidationError(f"profile {self.name} has no size {size!r} (has {sorted(self.sizes)})",
                                      size=size)
            return int(self.sizes[size])
        if not isinstance(size, (int, np.integer)) or isinstance(size, bool) or size < 1:
            raise ValidationError(f"size must be 'quick', 'full' or a positive int, got {size!r}", size=size)
        return int(size)


def _section(cls: type, data: Mapping[str, Any], where: str) -> Any:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown keys {', '.join(unknown)}", keys=unknown)
    return cls(**data)


def profile_from_mapping(data: Mapping[str, Any], *, source_sha256: str = "") -> Profile:
    data = dict(data)
    where = f"profile {data.get('name', '?')}"
    time_ = data.pop("time", {})
    out = dict(
        name=data.pop("name"), description=data.pop("description", ""),
        sizes=dict(data.pop("sizes", {"quick": 2000, "full": 200_000})),
        start=time_.get("start", "2026-09-01T00:00:00Z"), days=float(time_.get("days", 28)),
        conversations=_section(ConversationShape, data.pop("conversations", {}), f"{where} [conversations]"),
        retention=dict(data.pop("retention", {"default": 1.0})),
        messages=_section(MessageMix, data.pop("messages", {}), f"{where} [messages]"),
        holes=_section(HoleModel, data.pop("holes", {}), f"{where} [holes]"),
        source_sha256=source_sha256)
    if data:
        raise ConfigError(f"{where}: unknown sections {', '.join(sorted(data))}")
    profile = Profile(**out)
    profile.messages.type_weights()
    profile.retention_weights()
    return profile


def profile_names(profiles_dir: Path = PROFILES_DIR) -> list[str]:
    return sorted(p.stem for p in Path(profiles_dir).glob("*.toml"))


def load_profile(name_or_path: str | Path, profiles_dir: Path = PROFILES_DIR) -> Profile:
    """A profile by name (``datasets/profiles/<name>.toml``) or by path."""
    path = Path(name_or_path)
    if path.suffix != ".toml":
        path = Path(profiles_dir) / f"{name_or_path}.toml"
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode())
    except FileNotFoundError:
        raise ConfigError(f"no workload profile {name_or_path!r} (known: {', '.join(profile_names(profiles_dir))})",
                          profile=str(name_or_path)) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read profile {path}: {exc}", path=str(path)) from exc
    return profile_from_mapping(data, source_sha256=hashlib.sha256(raw).hexdigest())


# ---- generation ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Workload:
    """The generated tables and what produced them."""

    profile: Profile
    seed: int
    size: str | int
    bucket_width: int
    messages: pd.DataFrame
    conversations: pd.DataFrame
    holes: pd.DataFrame

    def stats(self) -> dict[str, Any]:
        m, c = self.messages, self.conversations
        recipients = m["members"].to_numpy() - 1
        body = m["body_bytes"].to_numpy()
        thumbs = m.loc[m["thumbnail_bytes"] > 0, "thumbnail_bytes"].to_numpy()
        return {
            "messages": int(len(m)), "conversations": int(len(c)),
            "direct_conversations": int((c["kind"] == "direct").sum()),
            "group_conversations": int((c["kind"] == "group").sum()),
            "group_members_max": int(c["members"].max()) if len(c) else 0,
            "r_avg": float(recipients.mean()) if len(m) else 0.0,
            "messages_by_type": {MessageType(int(k)).name.lower(): int(v)
                                 for k, v in m["message_type"].value_counts().sort_index().items()},
            "retention_by_conversation": {RetentionClass(int(k)).name.lower(): int(v)
                                          for k, v in c["retention_class"].value_counts().sort_index().items()},
            "e2ee_messages": int(m["e2ee"].sum()), "mentions": int((m["mention_count"] > 0).sum()),
            "mention_all": int(m["mention_all"].sum()), "replies": int(m["reply_to_conversation_seq"].notna().sum()),
            "body_bytes_p50": percentile(body, 50) if len(body) else 0.0,
            "body_bytes_p99": percentile(body, 99) if len(body) else 0.0,
            "thumbnails": int(len(thumbs)), "thumbnail_bytes_mean": float(thumbs.mean()) if len(thumbs) else 0.0,
            "thumbnail_bytes_max": int(thumbs.max()) if len(thumbs) else 0,
            "holes": int(len(self.holes)), "hole_values": int(self.holes["gap"].sum()) if len(self.holes) else 0,
            "hole_empty_buckets_max": int(self.holes["empty_buckets"].max()) if len(self.holes) else 0,
        }


def _uuid(seed: int, kind: str, *parts: int) -> uuid.UUID:
    digest = hashlib.blake2b(f"{seed}:{kind}:{':'.join(map(str, parts))}".encode(), digest_size=16).digest()
    return uuid.UUID(bytes=digest, version=4)


def _lognormal_int(rng: np.random.Generator, median: float, sigma: float, n: int, lo: int, hi: int) -> np.ndarray:
    return np.clip(np.rint(rng.lognormal(math.log(median), sigma, n)), lo, hi).astype(np.int64)


def _allocate_seqs(counts: np.ndarray, holes: HoleModel, rng: np.random.Generator,
                   bucket_width: int) -> tuple[np.ndarray, list[dict[str, int]]]:
    """conversation_seq per message, conversation by conversation, with reservation windows.

    A writer reserves ``window`` values at a time; before any message it may crash
    (``crash_probability``) and lose the rest of its window, and each following writer
    may crash too before using its window (``repeat_probability``): whole windows lost,
    i.e. runs of empty buckets.
    """
    n = int(counts.sum())
    crash = rng.random(n) < holes.crash_probability
    extra_windows = rng.geometric(1.0 - holes.repeat_probability, n) - 1 if holes.repeat_probability > 0 \
        else np.zeros(n, dtype=np.int64)
    seqs = np.empty(n, dtype=np.int64)
    hole_rows: list[dict[str, int]] = []
    w = int(holes.window)
    i = 0
    for conv, k in enumerate(counts):
        nxt, window_end = 1, 1 + w
        for _ in range(int(k)):
            if crash[i] and nxt > 1:
                lost = 1 + int(extra_windows[i])
                start = nxt
                nxt = window_end + (lost - 1) * w
                window_end = nxt + w
                first_bucket = -(-start // bucket_width)          # first bucket starting inside the gap
                last_bucket = nxt // bucket_width - 1             # last bucket ending inside it
                hole_rows.append({"conversation_idx": conv, "gap_start": start, "next_seq": nxt,
                                  "gap": nxt - start, "windows": lost,
                                  "empty_buckets": max(0, last_bucket - first_bucket + 1)})
            seqs[i] = nxt
            nxt += 1
            if nxt == window_end:
                window_end += w
            i += 1
    return seqs, hole_rows


def generate(profile: Profile | str, *, size: str | int = "quick", seed: int = 0,
             bucket_width: int = _DEFAULTS.message_seq_bucket_width) -> Workload:
    """Generate a workload: the same (profile, size, seed) always gives the same rows."""
    if isinstance(profile, str):
        profile = load_profile(profile)
    n = profile.size(size)
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValidationError(f"seed must be a non-negative int, got {seed!r}", seed=seed)
    rng = np.random.default_rng([int(seed), GENERATOR_VERSION])
    cs, mm = profile.conversations, profile.messages

    # conversations: direct (2 members) or groups (log-normal, 3..max members)
    n_conv = max(1, math.ceil(n / cs.messages_per_conversation_mean))
    is_group = rng.random(n_conv) < cs.group_share
    members = np.full(n_conv, 2, dtype=np.int64)
    members[is_group] = _lognormal_int(rng, cs.group_members_median, cs.group_members_sigma, int(is_group.sum()),
                                       3, cs.group_members_max)
    activity = rng.lognormal(0.0, cs.activity_sigma, n_conv)
    activity[is_group] *= members[is_group].astype(float) ** cs.group_activity_exponent
    # Split the messages between direct chats (1 recipient) and groups so that the
    # message-weighted recipient count hits r_avg_target (design §7: R_avg ~= 22).
    weights = activity.copy()
    if is_group.any() and (~is_group).any():
        r_group = float((activity[is_group] * (members[is_group] - 1)).sum() / activity[is_group].sum())
        direct_share = float(np.clip((r_group - cs.r_avg_target) / (r_group - 1.0), 0.0, 1.0)) if r_group > 1 else 1.0
        weights[~is_group] *= direct_share / activity[~is_group].sum()
        weights[is_group] *= (1.0 - direct_share) / activity[is_group].sum()
    counts = rng.multinomial(n, weights / weights.sum())
    keep = counts > 0
    is_group, members, counts = is_group[keep], members[keep], counts[keep]
    n_conv = len(counts)
    tenant_idx = rng.integers(0, cs.tenants, n_conv)
    retention = np.array([int(r) for r in RETENTION_ORDER])[rng.choice(4, n_conv, p=profile.retention_weights())]
    e2ee_conv = rng.random(n_conv) < np.where(is_group, cs.e2ee_group_share, cs.e2ee_direct_share)

    # messages, grouped by conversation, time-ordered within each
    conv = np.repeat(np.arange(n_conv), counts)
    first_row = np.concatenate(([0], np.cumsum(counts)[:-1]))
    pos = np.arange(n) - first_row[conv]
    day = rng.integers(0, max(1, math.ceil(profile.days)), n)
    hour = rng.choice(24, n, p=_DIURNAL / _DIURNAL.sum())
    t_ms = profile.start_ms + (day * 86_400_000 + hour * 3_600_000 + rng.integers(0, 3_600_000, n))
    t_ms = t_ms[np.lexsort((t_ms, conv))]
    seqs, hole_rows = _allocate_seqs(counts, profile.holes, rng, bucket_width)

    mtype = np.array([int(t) for t in TYPE_ORDER])[rng.choice(len(TYPE_ORDER), n, p=mm.type_weights())]
    is_text, is_custom = mtype == MessageType.TEXT, mtype == MessageType.CUSTOM
    is_media = np.isin(mtype, [int(t) for t in _MEDIA_TYPES])
    has_thumb = np.isin(mtype, [int(t) for t in _THUMB_TYPES])
    body = np.zeros(n, dtype=np.int64)
    body[is_text] = _lognormal_int(rng, mm.text_bytes_median, mm.text_bytes_sigma, int(is_text.sum()), 1,
                                   mm.text_bytes_max)
    caption = is_media & (rng.random(n) < mm.caption_share)
    body[caption] = _lognormal_int(rng, mm.caption_bytes_median, 0.8, int(caption.sum()), 1, mm.text_bytes_max)
    body[is_custom] = _lognormal_int(rng, mm.custom_bytes_median, 0.7, int(is_custom.sum()), 2, mm.text_bytes_max)
    thumb = np.zeros(n, dtype=np.int64)
    thumb[has_thumb] = _lognormal_int(rng, mm.thumbnail_bytes_median, mm.thumbnail_bytes_sigma,
                                      int(has_thumb.sum()), 256, mm.thumbnail_bytes_max)
    object_size = np.zeros(n, dtype=np.int64)
    duration = np.zeros(n, dtype=np.int64)
    for t in _MEDIA_TYPES:
        sel = mtype == t
        median, sigma = _OBJECT_SIZE[t]
        object_size[sel] = _lognormal_int(rng, median, sigma, int(sel.sum()), 1, 2**40)
        if t in _DURATION_MS:
            median, sigma = _DURATION_MS[t]
            duration[sel] = _lognormal_int(rng, median, sigma, int(sel.sum()), 500, 3_600_000)
    dims = np.array(_DIMENSIONS)[rng.integers(0, len(_DIMENSIONS), n)]
    width = np.where(has_thumb, dims[:, 0], 0)
    height = np.where(has_thumb, dims[:, 1], 0)
    mime = np.array([_MIME.get(MessageType(int(t)), "") for t in TYPE_ORDER], dtype=object)[
        np.searchsorted([int(t) for t in TYPE_ORDER], mtype)]
    custom_type = np.where(is_custom, np.array(_CUSTOM_TYPES, dtype=object)[rng.integers(0, 3, n)], None)

    e2ee = e2ee_conv[conv]
    # E2EE: the media key, digest and thumbnail travel inside the client's ciphertext body
    e2ee_media = e2ee & is_media
    body[e2ee_media] += thumb[e2ee_media] + E2EE_MEDIA_KEY_BYTES
    thumb[e2ee_media] = 0
    body[e2ee] += E2EE_OVERHEAD_BYTES

    msg_members = members[conv]
    in_group = is_group[conv]
    mention = in_group & ~e2ee & (rng.random(n) < mm.mention_share)
    mention_count = np.where(mention, np.minimum(1 + rng.poisson(max(0.0, mm.mention_count_mean - 1), n),
                                                 msg_members - 1), 0)
    mention_all = in_group & ~e2ee & (rng.random(n) < mm.mention_all_share)
    reply = (pos > 0) & (rng.random(n) < mm.reply_share)
    back = np.minimum(rng.geometric(1.0 / max(1.0, mm.reply_distance_mean), n), np.maximum(pos, 1))
    reply_to = pd.array(np.where(reply, seqs[np.arange(n) - np.where(reply, back, 0)], 0), dtype="Int64")
    reply_to[~reply] = pd.NA
    sender = np.where(in_group, np.floor(msg_members * rng.random(n) ** 3), rng.integers(0, 2, n)).astype(np.int64)
    device = rng.integers(0, cs.devices_per_user_max, n)
    content_seed = rng.integers(0, 2**62, n, dtype=np.int64)

    tenant_ids = [str(_uuid(seed, "tenant", t)) for t in range(cs.tenants)]
    conv_ids = [str(_uuid(seed, "conversation", i)) for i in range(n_conv)]
    senders = [str(_uuid(seed, "user", int(c), int(s))) for c, s in zip(conv, sender)]
    devices = [str(_uuid(seed, "device", int(c), int(s), int(d))) for c, s, d in zip(conv, sender, device)]
    messages = pd.DataFrame({
        "row": np.arange(n, dtype=np.int64),
        "tenant_id": np.array(tenant_ids, dtype=object)[tenant_idx[conv]],
        "conversation_id": np.array(conv_ids, dtype=object)[conv],
        "conversation_idx": conv.astype(np.int32),
        "members": msg_members.astype(np.int32),
        "sender_member": sender.astype(np.int32),
        "sender_id": senders, "sender_device_id": devices,
        "client_message_id": [f"{profile.name}-{seed}-{i}" for i in range(n)],
        "conversation_seq": seqs, "seq_bucket": seqs // bucket_width,
        "created_at_ms": t_ms.astype(np.int64),
        "message_type": mtype.astype(np.int8), "custom_type": custom_type,
        "body_bytes": body.astype(np.int32), "thumbnail_bytes": thumb.astype(np.int32),
        "media_size_bytes": object_size, "media_width": width.astype(np.int32),
        "media_height": height.astype(np.int32), "duration_ms": duration.astype(np.int32), "mime": mime,
        "mention_count": mention_count.astype(np.int16), "mention_all": mention_all,
        "reply_to_conversation_seq": reply_to, "e2ee": e2ee,
        "retention_class": retention[conv].astype(np.int8), "content_seed": content_seed,
    })
    last_seq = np.zeros(n_conv, dtype=np.int64)
    last_seq[conv] = seqs  # rows are seq-ordered within a conversation: the last write wins
    holes = pd.DataFrame(hole_rows, columns=["conversation_idx", "gap_start", "next_seq", "gap", "windows",
                                             "empty_buckets"]).astype(np.int64)
    conversations = pd.DataFrame({
        "conversation_idx": np.arange(n_conv, dtype=np.int32), "conversation_id": conv_ids,
        "tenant_id": np.array(tenant_ids, dtype=object)[tenant_idx],
        "kind": np.where(is_group, "group", "direct"), "members": members.astype(np.int32),
        "e2ee": e2ee_conv, "retention_class": retention.astype(np.int8), "messages": counts.astype(np.int64),
        "latest_conversation_seq": last_seq,
        "holes": np.bincount(holes["conversation_idx"].to_numpy(), minlength=n_conv).astype(np.int32)
        if len(holes) else np.zeros(n_conv, dtype=np.int32),
    })
    holes.insert(1, "conversation_id", [conv_ids[i] for i in holes["conversation_idx"]])
    return Workload(profile=profile, seed=int(seed), size=size, bucket_width=bucket_width, messages=messages,
                    conversations=conversations, holes=holes)


# ---- files --------------------------------------------------------------------------------
TABLES = ("messages", "conversations", "holes")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def dataset_dir(profile: str, size: str | int, seed: int, out_dir: Path = DEFAULT_OUT_DIR) -> Path:
    return Path(out_dir) / f"{profile}-{size}-s{seed}"


def save(workload: Workload, out_dir: Path | None = None) -> dict[str, Any]:
    """Write ``<table>.parquet`` for each table plus ``manifest.json``; returns the manifest."""
    out = Path(out_dir) if out_dir is not None else dataset_dir(workload.profile.name, workload.size, workload.seed)
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for name in TABLES:
        path = out / f"{name}.parquet"
        getattr(workload, name).to_parquet(path, index=False, engine="pyarrow", compression="zstd")
        files[path.name] = {"sha256": _sha256(path), "bytes": path.stat().st_size,
                            "rows": int(len(getattr(workload, name)))}
    combined = hashlib.sha256("".join(f"{k}:{v['sha256']}\n" for k, v in sorted(files.items())).encode()).hexdigest()
    manifest = {
        "profile": workload.profile.name, "profile_sha256": workload.profile.source_sha256,
        "description": workload.profile.description, "generator_version": GENERATOR_VERSION,
        "seed": workload.seed, "size": workload.size, "bucket_width": workload.bucket_width,
        "seq_reservation_window": workload.profile.holes.window,
        "counts": workload.stats(), "files": files, "sha256": combined,
    }
    write_json(out / "manifest.json", manifest, sort_keys=True)
    return manifest


def load(path: Path) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    """(manifest, tables) of a saved dataset; each file's sha256 is checked against the manifest."""
    path = Path(path)
    manifest = json.loads((path / "manifest.json").read_text())
    tables = {}
    for name in TABLES:
        f = path / f"{name}.parquet"
        if _sha256(f) != manifest["files"][f.name]["sha256"]:
            raise ValidationError(f"{f} does not match its manifest sha256", path=str(f))
        tables[name] = pd.read_parquet(f)
    return manifest, tables


def ensure(profile: str, *, size: str | int = "quick", seed: int = 0, out_dir: Path = DEFAULT_OUT_DIR,
           bucket_width: int = _DEFAULTS.message_seq_bucket_width) -> tuple[dict[str, Any], Workload]:
    """Generate and save (or regenerate over) the dataset; returns (manifest, workload)."""
    workload = generate(profile, size=size, seed=seed, bucket_width=bucket_width)
    return save(workload, dataset_dir(workload.profile.name, size, seed, out_dir)), workload


# ---- materialisation: row -> bytes / typed values --------------------------------------------
def _get(row: Any, name: str) -> Any:
    return row[name] if isinstance(row, Mapping) else getattr(row, name)


def _row_rng(row: Any, salt: int) -> np.random.Generator:
    return np.random.default_rng([int(_get(row, "content_seed")), salt])


def body_for(row: Any) -> bytes:
    """The message body: words for text/captions, JSON-ish for custom, opaque bytes for E2EE."""
    n = int(_get(row, "body_bytes"))
    if n == 0:
        return b""
    rng = _row_rng(row, 1)
    if bool(_get(row, "e2ee")):
        return rng.bytes(n)
    words = np.array(_VOCAB, dtype=object)[rng.integers(0, len(_VOCAB), n // 3 + 2)]
    text = " ".join(words)
    if int(_get(row, "message_type")) == MessageType.CUSTOM:
        text = '{"type":"' + str(_get(row, "custom_type")) + '","text":"' + text
    data = text.encode()
    return data[:n] if len(data) >= n else data + b"." * (n - len(data))


def media_for(row: Any) -> Any:
    """``lab.store.media.MediaMetadata`` of a media row (None for text, custom and E2EE rows)."""
    mtype = int(_get(row, "message_type"))
    if mtype not in [int(t) for t in _MEDIA_TYPES] or bool(_get(row, "e2ee")):
        return None
    from lab.store.media import MediaMetadata

    rng = _row_rng(row, 2)
    thumb_n = int(_get(row, "thumbnail_bytes"))
    has_thumb = thumb_n > 0
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz#$%*+,-.:;=?@[]^_{|}~"
    blurhash = "".join(alphabet[i] for i in rng.integers(0, len(alphabet), BLURHASH_CHARS)) if has_thumb else ""
    return MediaMetadata(
        object_id=f"obj/{uuid.UUID(bytes=rng.bytes(16), version=4)}", mime=str(_get(row, "mime")),
        size_bytes=int(_get(row, "media_size_bytes")), width=int(_get(row, "media_width")),
        height=int(_get(row, "media_height")), duration_ms=int(_get(row, "duration_ms")),
        thumbnail=rng.bytes(thumb_n),  # JPEG bytes are as incompressible as random ones
        blurhash=blurhash, checksum=rng.bytes(CHECKSUM_BYTES))


def mentions_for(row: Any, seed: int) -> Any:
    """``lab.store.media.MentionTargets`` of a row (None without mentions); ``seed`` is the dataset's."""
    count, at_all = int(_get(row, "mention_count")), bool(_get(row, "mention_all"))
    if count == 0 and not at_all:
        return None
    from lab.store.media import MentionTargets

    rng = _row_rng(row, 3)
    members, sender = int(_get(row, "members")), int(_get(row, "sender_member"))
    others = [m for m in rng.choice(members, size=min(members, count + 1), replace=False) if m != sender][:count]
    conv = int(_get(row, "conversation_idx"))
    return MentionTargets(user_ids=tuple(_uuid(seed, "user", conv, int(m)) for m in others), at_all=at_all)


def _optional_int(value: Any) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def to_message(row: Any, *, seed: int, message_id: int | None = None, node_id: int = 1) -> Any:
    """A ``lab.store.records.Message`` at the row's own coordinates (bulk loads that bypass the
    write path: the archiver's shape). message_id defaults to (created_at, node, row)."""
    from lab.store.ids import compose_message_id
    from lab.store.records import Message

    mid = message_id if message_id is not None else compose_message_id(
        time_ms=int(_get(row, "created_at_ms")), node_id=node_id, counter=int(_get(row, "row")))
    custom = _get(row, "custom_type")
    return Message(
        tenant_id=uuid.UUID(str(_get(row, "tenant_id"))), conversation_id=uuid.UUID(str(_get(row, "conversation_id"))),
        seq_bucket=int(_get(row, "seq_bucket")), conversation_seq=int(_get(row, "conversation_seq")),
        message_id=mid, last_activity_id=mid, sender_id=uuid.UUID(str(_get(row, "sender_id"))),
        sender_device_id=uuid.UUID(str(_get(row, "sender_device_id"))),
        client_message_id=str(_get(row, "client_message_id")), message_type=MessageType(int(_get(row, "message_type"))),
        custom_type=None if custom is None or (isinstance(custom, float) and math.isnan(custom)) else str(custom),
        body=body_for(row), e2ee=bool(_get(row, "e2ee")), media=media_for(row),
        reply_to_conversation_seq=_optional_int(_get(row, "reply_to_conversation_seq")),
        mentions=mentions_for(row, seed), created_at_ms=int(_get(row, "created_at_ms")),
        retention_class=RetentionClass(int(_get(row, "retention_class"))))


def to_send_request(row: Any, *, seed: int) -> Any:
    """A ``lab.store.SendRequest`` for the row (the store allocates conversation_seq)."""
    from lab.store import SendRequest  # type: ignore[attr-defined]

    custom = _get(row, "custom_type")
    return SendRequest(
        tenant_id=uuid.UUID(str(_get(row, "tenant_id"))), conversation_id=uuid.UUID(str(_get(row, "conversation_id"))),
        sender_id=uuid.UUID(str(_get(row, "sender_id"))), sender_device_id=uuid.UUID(str(_get(row, "sender_device_id"))),
        client_message_id=str(_get(row, "client_message_id")), body=body_for(row),
        message_type=MessageType(int(_get(row, "message_type"))), media=media_for(row),
        mentions=mentions_for(row, seed), reply_to_conversation_seq=None,
        retention_class=RetentionClass(int(_get(row, "retention_class"))), e2ee=bool(_get(row, "e2ee")),
        custom_type=None if custom is None or (isinstance(custom, float) and math.isnan(custom)) else str(custom))


def send_requests(messages: pd.DataFrame, *, seed: int) -> Iterator[Any]:
    for row in messages.to_dict("records"):
        yield to_send_request(row, seed=seed)


def messages_of(messages: pd.DataFrame, *, seed: int) -> Iterator[Any]:
    for row in messages.to_dict("records"):
        yield to_message(row, seed=seed)
