import dataclasses
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lab.errors import InvalidId, PayloadTooLarge, ValidationError
from lab.store.rows.media import MEDIA_THUMBNAIL_MAX_BYTES, MediaMetadata, MentionTargets
from lab.store.rows.proto import common_pb2

u32 = st.integers(0, 2**32 - 1)
media = st.builds(MediaMetadata, object_id=st.text(), mime=st.text(), size_bytes=st.integers(0, 2**64 - 1),
                  width=u32, height=u32, duration_ms=u32, thumbnail=st.binary(max_size=2048),
                  blurhash=st.text(), checksum=st.binary(max_size=64))
mentions = st.builds(MentionTargets, user_ids=st.lists(st.uuids(), max_size=20).map(tuple), at_all=st.booleans())


@given(media)
def test_media_metadata_round_trip(meta):
    assert MediaMetadata.decode(meta.encode()) == meta


@given(mentions)
def test_mention_targets_round_trip(targets):
    assert MentionTargets.decode(targets.encode()) == targets


def test_media_metadata_wire_is_the_shared_proto():
    meta = MediaMetadata(object_id="obj/1", mime="image/png", size_bytes=2**40, width=640, height=480,
                         duration_ms=0, thumbnail=b"\x89PNG", blurhash="LEHV6n", checksum=b"\x01" * 32)
    wire = common_pb2.MediaMetadata.FromString(meta.encode())
    assert (wire.object_id, wire.mime, wire.bytes, wire.width, wire.height) == ("obj/1", "image/png", 2**40, 640, 480)
    assert (wire.thumbnail, wire.blurhash, wire.checksum) == (b"\x89PNG", "LEHV6n", b"\x01" * 32)
    # and a message written by another producer of common.proto decodes here
    other = common_pb2.MediaMetadata(object_id="x", bytes=7, duration_ms=1500).SerializeToString()
    assert MediaMetadata.decode(other) == MediaMetadata(object_id="x", size_bytes=7, duration_ms=1500)


def test_mention_user_ids_are_16_raw_bytes_on_the_wire():
    users = (uuid.uuid4(), uuid.uuid4())
    wire = common_pb2.MentionTargets.FromString(MentionTargets(user_ids=users, at_all=True).encode())
    assert list(wire.user_ids) == [u.bytes for u in users]
    assert wire.at_all is True


def test_mention_targets_accept_uuid_strings_and_lists():
    user = uuid.uuid4()
    targets = MentionTargets(user_ids=[str(user)])
    assert targets.user_ids == (user,)


def test_mention_targets_reject_bad_ids():
    with pytest.raises(InvalidId):
        MentionTargets(user_ids=["nope"])
    with pytest.raises(ValidationError):
        MentionTargets(user_ids="not-a-list")
    with pytest.raises(ValidationError):
        MentionTargets(at_all=1)


def test_mention_decode_rejects_user_id_of_wrong_length():
    wire = common_pb2.MentionTargets(user_ids=[b"\x00" * 15]).SerializeToString()
    with pytest.raises(ValidationError):
        MentionTargets.decode(wire)


def test_thumbnail_at_limit_passes_and_one_byte_over_fails():
    assert MEDIA_THUMBNAIL_MAX_BYTES == 32 * 1024
    ok = MediaMetadata(thumbnail=b"x" * MEDIA_THUMBNAIL_MAX_BYTES)
    assert MediaMetadata.decode(ok.encode()).thumbnail == ok.thumbnail
    with pytest.raises(PayloadTooLarge) as info:
        MediaMetadata(thumbnail=b"x" * (MEDIA_THUMBNAIL_MAX_BYTES + 1)).encode()
    assert info.value.size == MEDIA_THUMBNAIL_MAX_BYTES + 1
    assert info.value.limit == MEDIA_THUMBNAIL_MAX_BYTES


def test_thumbnail_limit_is_a_parameter():
    meta = MediaMetadata(thumbnail=b"x" * 100)
    with pytest.raises(PayloadTooLarge):
        meta.encode(thumbnail_max_bytes=99)
    wire = meta.encode(thumbnail_max_bytes=100)
    assert MediaMetadata.decode(wire) == meta  # decode does not enforce unless asked
    with pytest.raises(PayloadTooLarge):
        MediaMetadata.decode(wire, thumbnail_max_bytes=99)


@pytest.mark.parametrize("data", [b"\xff", b"\x0a\x05ab", b"\x0a\x02\xff\xfe", b"\x07"])
def test_malformed_media_bytes_raise_validation_error(data):
    with pytest.raises(ValidationError):
        MediaMetadata.decode(data)


@pytest.mark.parametrize("data", [b"\xff", b"\x0a\x05ab"])
def test_malformed_mention_bytes_raise_validation_error(data):
    with pytest.raises(ValidationError):
        MentionTargets.decode(data)


def test_decode_rejects_non_bytes():
    with pytest.raises(ValidationError):
        MediaMetadata.decode("abc")
    with pytest.raises(ValidationError):
        MentionTargets.decode(None)


def test_empty_blob_decodes_to_defaults():
    assert MediaMetadata.decode(b"") == MediaMetadata()
    assert MentionTargets.decode(b"") == MentionTargets()


@pytest.mark.parametrize("kwargs", [{"width": 2**32}, {"height": -1}, {"duration_ms": True},
                                    {"size_bytes": 2**64}, {"object_id": 5}, {"mime": "\ud800"},
                                    {"thumbnail": "text"}, {"checksum": None}])
def test_media_metadata_validates_fields(kwargs):
    with pytest.raises(ValidationError):
        MediaMetadata(**kwargs)


def test_media_metadata_is_frozen_and_keyword_only():
    meta = MediaMetadata(mime="image/png")
    with pytest.raises(dataclasses.FrozenInstanceError):
        meta.mime = "x"
    with pytest.raises(TypeError):
        MediaMetadata("obj")
