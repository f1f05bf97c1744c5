"""Generation: (profile, size, seed) -> the workload's tables, with one numpy ``Generator``.

More: docs/load-internals.md.
"""
from __future__ import annotations

import hashlib
import math
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from lab.constants import Constants
from lab.errors import ValidationError
from lab.measure import percentile
from lab.store import MessageType, RetentionClass
from lab.workload.profiles import RETENTION_ORDER, HoleModel, Profile, load_profile

_DEFAULTS = Constants.appendix_b()

GENERATOR_VERSION = 1  # bump when the same (profile, seed, size) would produce other rows
TYPE_ORDER = (MessageType.TEXT, MessageType.IMAGE, MessageType.VIDEO, MessageType.AUDIO, MessageType.FILE,
              MessageType.CUSTOM)
MEDIA_TYPES = (MessageType.IMAGE, MessageType.VIDEO, MessageType.AUDIO, MessageType.FILE)
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
# Chat traffic by hour of day (UTC), a two-hump day: quiet night, peaks at noon and evening.
_DIURNAL = np.array([2, 1, 1, 1, 1, 2, 3, 5, 7, 8, 8, 9, 10, 9, 8, 8, 8, 9, 10, 10, 9, 7, 5, 3], dtype=float)


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


def entity_uuid(seed: int, kind: str, *parts: int) -> uuid.UUID:
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
    is_media = np.isin(mtype, [int(t) for t in MEDIA_TYPES])
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
    for t in MEDIA_TYPES:
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

    tenant_ids = [str(entity_uuid(seed, "tenant", t)) for t in range(cs.tenants)]
    conv_ids = [str(entity_uuid(seed, "conversation", i)) for i in range(n_conv)]
    senders = [str(entity_uuid(seed, "user", int(c), int(s))) for c, s in zip(conv, sender)]
    devices = [str(entity_uuid(seed, "device", int(c), int(s), int(d))) for c, s, d in zip(conv, sender, device)]
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
