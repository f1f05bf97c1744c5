"""Protobuf definitions shared with the protocol layer; ``common_pb2`` is generated code
(``python -m lab.store.rows.proto.generate`` regenerates it from ``common.proto``)."""
