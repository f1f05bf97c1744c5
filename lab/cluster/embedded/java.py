"""The JVM the embedded servers run on: which ``java`` to use, and the flags JDK 17 needs.

Cassandra 5.0 runs on JDK 11 or 17 and reaches into JDK internals, so its launch needs the
module exports and opens of its own ``conf/jvm17-server.options`` (5.0 branch); tools started
from the server's classpath (nodetool) need the same module flags without the GC settings.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

from lab.errors import JavaNotFound

SUPPORTED_MAJORS = (11, 17)
JVM_DIR = Path("/usr/lib/jvm")
_VERSION_TIMEOUT_SECONDS = 30

# conf/jvm17-server.options of the 5.0 branch: the collector ...
GC_FLAGS = (
    "-XX:+UseG1GC",
    "-XX:+ParallelRefProcEnabled",
    "-XX:+ExitOnOutOfMemoryError",
)
# ... and what any JVM on the server's classpath needs (the server and its tools)
MODULE_FLAGS = (
    "-Djdk.attach.allowAttachSelf=true",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Djava.net.preferIPv4Stack=true",
    "-Xss256k",
    *[f"--add-exports={m}=ALL-UNNAMED" for m in (
        "java.base/jdk.internal.misc", "java.management.rmi/com.sun.jmx.remote.internal.rmi",
        "java.management/com.sun.jmx.remote.security", "java.rmi/sun.rmi.registry",
        "java.rmi/sun.rmi.server", "java.sql/java.sql", "java.base/java.lang.ref",
        "jdk.unsupported/sun.misc")],
    *[f"--add-opens={m}=ALL-UNNAMED" for m in (
        "java.base/java.lang.module", "java.base/jdk.internal.loader", "java.base/jdk.internal.ref",
        "java.base/jdk.internal.reflect", "java.base/jdk.internal.math", "java.base/jdk.internal.module",
        "java.base/jdk.internal.util.jar", "java.base/sun.nio.ch", "java.base/java.io",
        "java.base/java.lang.reflect", "java.base/java.lang", "java.base/java.util",
        "java.base/java.nio", "jdk.management/com.sun.management.internal")],
)
SERVER_FLAGS = GC_FLAGS + MODULE_FLAGS


def heap_flags(heap: str) -> list[str]:
    """A fixed-size heap: start-up never waits on growth, and the node's footprint is known."""
    return [f"-Xms{heap}", f"-Xmx{heap}"]


def java_major(java: str) -> int | None:
    """The major version ``java -version`` reports (8 for ``1.8``), or None when it cannot run."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True,
                             timeout=_VERSION_TIMEOUT_SECONDS).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2)) if major == 1 and m.group(2) else major


def find_java(majors: Iterable[int] = SUPPORTED_MAJORS) -> str:
    """A ``java`` of one of ``majors``: JAVA_HOME first, then PATH, then /usr/lib/jvm/*17*."""
    majors = tuple(majors)
    candidates = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"))
    if shutil.which("java"):
        candidates.append(shutil.which("java"))
    candidates += sorted(str(p) for p in JVM_DIR.glob("*17*/bin/java"))
    seen = []
    for java in candidates:
        if not java or not Path(java).exists():
            continue
        major = java_major(java)
        seen.append(f"{java} ({major})")
        if major in majors:
            return java
    wanted = " or ".join(map(str, majors))
    raise JavaNotFound(f"no Java {wanted} found (Cassandra 5.0 runs on JDK 11 or 17); "
                       f"looked at JAVA_HOME, PATH and {JVM_DIR}: {', '.join(seen) or 'nothing'}",
                       looked_at=tuple(seen))
