import subprocess
import sys
from pathlib import Path

import google.protobuf
import pytest
from google.protobuf.descriptor import FieldDescriptor as F

from lab.store.rows.proto import common_pb2, generate

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "lab" / "store" / "rows" / "proto" / "common_pb2.py"


def _version(text):
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


def _repeated(field):
    # protobuf 7 dropped FieldDescriptor.label; older runtimes lack is_repeated
    return field.is_repeated if hasattr(field, "is_repeated") else field.label == F.LABEL_REPEATED


@pytest.mark.spawns
def test_regenerating_gives_the_committed_bytes(tmp_path):
    out = tmp_path / "out"
    # run as the documented command, from an unrelated working directory
    proc = subprocess.run([sys.executable, "-m", "lab.store.rows.proto.generate", "--out", str(out)], cwd=tmp_path,
                          env={"PYTHONPATH": str(REPO), "PATH": ""}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (out / "common_pb2.py").read_bytes() == COMMITTED.read_bytes(), \
        "common_pb2.py is stale: run `python -m lab.store.rows.proto.generate` and commit the result"


def test_runtime_is_not_older_than_the_generator():
    generator = generate.generator_version(COMMITTED)
    assert _version(generator) >= (5, 0, 0)
    assert _version(google.protobuf.__version__) >= _version(generator), \
        f"protobuf runtime {google.protobuf.__version__} is older than the generator {generator}"


def test_fields_match_design_5_2():
    expected = {
        "MentionTargets": [("user_ids", 1, F.TYPE_BYTES, True), ("at_all", 2, F.TYPE_BOOL, False)],
        "MediaMetadata": [("object_id", 1, F.TYPE_STRING, False), ("mime", 2, F.TYPE_STRING, False),
                          ("bytes", 3, F.TYPE_UINT64, False), ("width", 4, F.TYPE_UINT32, False),
                          ("height", 5, F.TYPE_UINT32, False), ("duration_ms", 6, F.TYPE_UINT32, False),
                          ("thumbnail", 7, F.TYPE_BYTES, False), ("blurhash", 8, F.TYPE_STRING, False),
                          ("checksum", 9, F.TYPE_BYTES, False)],
    }
    assert common_pb2.DESCRIPTOR.package == "lab.common"
    assert set(common_pb2.DESCRIPTOR.message_types_by_name) == set(expected)
    for name, fields in expected.items():
        descriptor = common_pb2.DESCRIPTOR.message_types_by_name[name]
        actual = [(f.name, f.number, f.type, _repeated(f)) for f in descriptor.fields]
        assert actual == fields
