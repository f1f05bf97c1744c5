"""Protobuf definitions shared with the protocol layer; ``common_pb2`` is generated code."""
