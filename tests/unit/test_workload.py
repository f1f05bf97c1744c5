"""Workload datasets: deterministic, distributions in range, holes present, rows usable by the store."""
from __future__ import annotations

import json

import numpy as np
import pytest

from lab import workload
from lab.errors import ConfigError, ValidationError
from lab.store import MessageType, RetentionClass


@pytest.fixture(scope="module")
def chat_mix():
    return workload.generate("chat_mix", size=5000, seed=7)


def test_every_profile_loads_and_generates_its_quick_size():
    names = workload.profile_names()
    assert {"chat_mix", "media_heavy", "text_only"} <= set(names)
    for name in names:
        profile = workload.load_profile(name)
        wl = workload.generate(profile, size="quick", seed=1)
        assert len(wl.messages) == profile.sizes["quick"]
        assert profile.sizes["full"] > profile.sizes["quick"]


def test_same_seed_same_sha256_other_seed_other_files(tmp_path):
    a = workload.save(workload.generate("chat_mix", size="quick", seed=3), tmp_path / "a")
    b = workload.save(workload.generate("chat_mix", size="quick", seed=3), tmp_path / "b")
    c = workload.save(workload.generate("chat_mix", size="quick", seed=4), tmp_path / "c")
    assert a["sha256"] == b["sha256"]
    assert a["files"] == b["files"]
    assert a["sha256"] != c["sha256"]
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["profile"] == "chat_mix" and manifest["seed"] == 3 and manifest["size"] == "quick"
    assert manifest["counts"]["messages"] == 2000
    assert manifest["files"]["messages.parquet"]["rows"] == 2000
    _, tables = workload.load(tmp_path / "a")
    assert len(tables["messages"]) == 2000


def test_load_refuses_a_file_that_does_not_match_its_manifest(tmp_path):
    workload.save(workload.generate("text_only", size=300, seed=0), tmp_path)
    path = tmp_path / "holes.parquet"
    path.write_bytes(path.read_bytes() + b"x")
    with pytest.raises(ValidationError):
        workload.load(tmp_path)


def test_materialised_bytes_are_deterministic(chat_mix):
    row = chat_mix.messages.iloc[11].to_dict()
    assert workload.body_for(row) == workload.body_for(row)
    media_rows = chat_mix.messages[chat_mix.messages.thumbnail_bytes > 0]
    m = media_rows.iloc[0].to_dict()
    assert workload.media_for(m) == workload.media_for(m)
    assert len(workload.media_for(m).thumbnail) == m["thumbnail_bytes"]


def test_sizes_and_shapes_in_range(chat_mix):
    m, c = chat_mix.messages, chat_mix.conversations
    assert (m.body_bytes >= 0).all() and (m.body_bytes <= 65536).all()
    assert (m.thumbnail_bytes <= 32768).all()
    assert (m[m.thumbnail_bytes > 0].message_type.isin([MessageType.IMAGE, MessageType.VIDEO])).all()
    assert (c.members >= 2).all() and (c.members <= 1000).all()
    assert set(c.kind) == {"direct", "group"}
    assert (c[c.kind == "direct"].members == 2).all()
    stats = chat_mix.stats()
    assert 15 <= stats["r_avg"] <= 30  # §7: R_avg ~= 22
    assert set(stats["messages_by_type"]) >= {"text", "image", "video", "audio", "file", "custom"}
    assert 0.6 < stats["messages_by_type"]["text"] / len(m) < 0.95
    assert 0 < stats["e2ee_messages"] < len(m) * 0.3
    assert stats["mentions"] > 0 and stats["replies"] > 0
    assert set(m.retention_class.unique()) <= {int(r) for r in RetentionClass}
    # E2EE rows carry their media inside the opaque body
    assert (m[m.e2ee].thumbnail_bytes == 0).all()


def test_seqs_increase_per_conversation_and_time_follows_them(chat_mix):
    for _, g in chat_mix.messages.groupby("conversation_id"):
        seqs = g.conversation_seq.to_numpy()
        assert seqs[0] == 1 and (np.diff(seqs) > 0).all()
        assert (np.diff(g.created_at_ms.to_numpy()) >= 0).all()
    assert (chat_mix.messages.seq_bucket == chat_mix.messages.conversation_seq // 4096).all()
    replies = chat_mix.messages.dropna(subset=["reply_to_conversation_seq"])
    assert (replies.reply_to_conversation_seq < replies.conversation_seq).all()


def test_holes_from_crashed_reservation_windows(chat_mix):
    holes = chat_mix.holes
    assert len(holes) > 0
    m = chat_mix.messages
    window = chat_mix.profile.holes.window
    for h in holes.itertuples():
        seqs = set(m[m.conversation_idx == h.conversation_idx].conversation_seq)
        assert h.next_seq in seqs and h.gap_start - 1 in seqs
        assert not any(h.gap_start <= s < h.next_seq for s in seqs)
        assert h.gap == h.next_seq - h.gap_start
        # a writer restarts at a window boundary: the next seq starts a reservation window
        assert (h.next_seq - 1) % window == 0
    # whole windows lost in a row leave empty buckets
    big = workload.generate("chat_mix", size=60_000, seed=2)
    assert big.holes.empty_buckets.max() >= 2


def test_unknown_profile_and_bad_size_are_rejected():
    with pytest.raises(ConfigError):
        workload.load_profile("no_such_profile")
    with pytest.raises(ValidationError):
        workload.generate("chat_mix", size="huge")
    with pytest.raises(ConfigError):
        workload.profile_from_mapping({"name": "x", "messages": {"text": 1.0, "bogus": 1}})


def test_rows_become_store_messages_and_send_requests(chat_mix):
    rows = chat_mix.messages.head(50).to_dict("records")
    messages = [workload.to_message(r, seed=chat_mix.seed) for r in rows]
    assert all(msg.conversation_seq == r["conversation_seq"] for msg, r in zip(messages, rows))
    assert len({msg.message_id for msg in messages}) == 50
    requests = [workload.to_send_request(r, seed=chat_mix.seed) for r in rows]
    assert {req.client_message_id for req in requests} == {r["client_message_id"] for r in rows}
    for req in requests:  # a SendRequest checked itself when built; the store's limits on top
        req.check_limits(payload_max_bytes=65536, thumbnail_max_bytes=32768)


def test_your_profiles_in_datasets_profiles_are_read_beside_the_packaged_ones_and_win(tmp_path):
    """datasets/profiles/ is where an engineer drops the mix of their own product: a file there
    is a profile by its name, and one named like a packaged profile replaces it."""
    assert workload.USER_PROFILES_DIR.name == "profiles" and workload.USER_PROFILES_DIR.parent.name == "datasets"
    assert "example_mix" in workload.profile_names()  # the example to copy, found by name
    assert workload.profile_source("example_mix") == "datasets/profiles/example_mix.toml"
    assert workload.profile_source("chat_mix") == "lab/workload/profiles/chat_mix.toml"
    mine, packaged = tmp_path / "mine", tmp_path / "packaged"
    mine.mkdir()
    packaged.mkdir()
    (packaged / "chat_mix.toml").write_text(workload.profile_path("chat_mix").read_text())
    (packaged / "text_only.toml").write_text(workload.profile_path("text_only").read_text())
    (mine / "chat_mix.toml").write_text('name = "chat_mix"\ndescription = "mine"\n[messages]\ntext = 1.0\nimage = 0.0\n'
                                        'video = 0.0\naudio = 0.0\nfile = 0.0\ncustom = 0.0\n')
    dirs = (mine, packaged)
    assert workload.profile_names(dirs) == ["chat_mix", "text_only"]
    assert workload.load_profile("chat_mix", dirs).description == "mine"  # yours wins
    assert workload.load_profile("text_only", dirs).name == "text_only"
    with pytest.raises(ConfigError, match=r"no workload profile 'nope' in .*mine/ or .*packaged/ \(known: chat_mix, "
                                          r"text_only\); copy datasets/profiles/example_mix.toml"):
        workload.load_profile("nope", dirs)
