"""The project's Jupyter kernel: its spec, its installation, the IPython extension it loads, and
importing the notebook tools (papermill, nbformat, nbconvert) without jsonschema's optional IRI grammar.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from lab.errors import ConfigError, ConnectError

KERNEL_NAME = "message-store-lab"
DISPLAY_NAME = f"Message-store lab (Python {sys.version_info.major}.{sys.version_info.minor})"
PLAIN_KERNEL_NAME = "python3"  # ipykernel's own, kept for tools that ask for it
EXTENSION = "lab.calibration.kernel"
_RED, _RESET = "\x1b[0;31m", "\x1b[0m"
OPTIONAL_GRAMMAR = "rfc3987_syntax"


def skip_iri_grammar() -> None:
    """Mark the optional grammar absent in this process (jsonschema then skips its two format
    checks), unless something imported it already. Call before importing the notebook tools."""
    sys.modules.setdefault(OPTIONAL_GRAMMAR, None)


def kernel_spec(python: str | None = None) -> dict[str, Any]:
    """kernel.json of the project kernel for ``python`` (default: this interpreter)."""
    return {"argv": [python or sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                     "--ext", EXTENSION],
            "display_name": DISPLAY_NAME, "language": "python", "metadata": {"debugger": True}}


def install(python: str | None = None, prefix: str | None = None) -> Path:
    """Install (or refresh) the project kernel under ``prefix`` (default: this venv)."""
    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "kernel.json").write_text(json.dumps(kernel_spec(python), indent=1))
        path = KernelSpecManager().install_kernel_spec(tmp, KERNEL_NAME, prefix=prefix or sys.prefix)
    return Path(path)


def installed(python: str | None = None) -> bool:
    """Is the project kernel installed in this venv, running ``python``, loading the extension?"""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    except NoSuchKernel:
        return False
    return (spec.argv[:1] == [python or sys.executable] and EXTENSION in spec.argv
            and Path(spec.resource_dir).is_relative_to(sys.prefix))


# ---- the IPython extension ---------------------------------------------------------------
def _one_line(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: int | None = None) -> list[str]:
    """The error as one line: its type and message (which carries the fix), no driver traceback."""
    stb = [f"{_RED}{etype.__name__}{_RESET}: {value}"]
    shell._showtraceback(etype, value, stb)  # the error output of the cell (ename, evalue, this line)
    return stb


def load_ipython_extension(shell: Any) -> None:
    shell.set_custom_exc((ConnectError, ConfigError), _one_line)
