"""Regenerate the committed Protobuf code from ``common.proto``.

More: docs/store-internals.md.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
PROTO_FILES = ("common.proto",)
_VERSION_LINE = re.compile(r"^# Protobuf Python Version: (\S+)$", re.MULTILINE)


def generate(out_dir: Path = PROTO_DIR) -> list[Path]:
    """Run the bundled protoc; return the written ``*_pb2.py`` paths."""
    from grpc_tools import protoc  # dev dependency: imported only when regenerating

    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    # -I is the proto directory itself, so the descriptor's file name is "common.proto"
    # whatever the checkout path: the output must not depend on where the repo lives.
    args = ["grpc_tools.protoc", f"-I{PROTO_DIR}", f"--python_out={out_dir}",
            *(str(PROTO_DIR / name) for name in PROTO_FILES)]
    code = protoc.main(args)
    if code != 0:
        raise RuntimeError(f"protoc exited with {code}: {' '.join(args)}")
    return [out_dir / name.replace(".proto", "_pb2.py") for name in PROTO_FILES]


def generator_version(pb2_path: Path) -> str:
    """The protobuf version that wrote a ``*_pb2.py`` (from its header comment)."""
    match = _VERSION_LINE.search(Path(pb2_path).read_text())
    if not match:
        raise ValueError(f"{pb2_path} has no 'Protobuf Python Version' header")
    return match.group(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.store.rows.proto.generate", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PROTO_DIR, help="output directory (default: lab/store/rows/proto)")
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
