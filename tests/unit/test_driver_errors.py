"""Every driver exception is mapped into the lab's error tree at one boundary."""
from __future__ import annotations

import inspect

import cassandra
import cassandra.cluster
import cassandra.connection
import cassandra.protocol

from lab import errors
from lab.cluster.driver_errors import DRIVER_ERROR_MAP, translate


def _driver_exception_classes():
    seen = set()
    for module in (cassandra, cassandra.cluster, cassandra.protocol, cassandra.connection):
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, Exception) and obj.__module__.startswith("cassandra"):
                seen.add(obj)
    return seen


def test_every_driver_exception_is_mapped():
    # the catch-all (Exception -> ClusterError) must not be what maps a driver class
    specific = tuple(c for c, _ in DRIVER_ERROR_MAP if c is not Exception)
    unmapped = sorted(c.__name__ for c in _driver_exception_classes() if not issubclass(c, specific))
    assert unmapped == []
    for cls in _driver_exception_classes():
        lab_cls = next(mapped for c, mapped in DRIVER_ERROR_MAP if issubclass(cls, c))
        assert issubclass(lab_cls, errors.ClusterError), cls


def test_translate_keeps_cause_and_table():
    exc = cassandra.OperationTimedOut("slow")
    err = translate(exc, table="message_record")
    assert isinstance(err, errors.RequestTimeout)
    assert err.table == "message_record" and err.__cause__ is exc


def test_tree_has_one_root():
    """Errors under LabError; the lab's warnings (a separate, drawn tree) under LabWarning."""
    for _, obj in inspect.getmembers(errors, inspect.isclass):
        if obj.__module__ == errors.__name__:
            assert issubclass(obj, errors.LabError) or issubclass(obj, errors.LabWarning), obj
            assert obj.__name__ in errors.__doc__, obj


def test_every_error_class_lives_in_errors_py():
    """One error tree, in one module: no exception or warning class is defined anywhere else in lab/."""
    import ast
    from pathlib import Path

    lab_dir = Path(errors.__file__).parent
    elsewhere = []
    for path in sorted(lab_dir.rglob("*.py")):
        if path.name == "errors.py" and path.parent == lab_dir:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]
                if any(b.endswith(("Error", "Exception", "Warning")) for b in bases):
                    elsewhere.append(f"{path.relative_to(lab_dir.parent)}:{node.lineno} {node.name}")
    assert elsewhere == []
