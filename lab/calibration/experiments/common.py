"""What every experiment shares: its output folder, the cluster session, scratch keyspaces and
bulk loading of workload rows (statistics and timers: :mod:`lab.measure`).

Output layout (``results/<run-id>/<notebook>/``): ``values.json`` (every measured value, names
carrying their unit), ``*.png`` figures, ``*.csv`` + ``*.parquet`` tables. Values are also
glued with scrapbook when running inside a kernel, so ``scrapbook.read_notebook`` sees them.
"""
from __future__ import annotations

import contextlib
import json
import random
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lab.cluster.admin import admin_for
from lab.cluster.config import ClusterConfig, load_config
from lab.cluster.connection import connect
from lab.cluster.services import ServicesConfig, load_services
from lab.constants import Constants, load_constants
from lab.errors import ValidationError
from lab.measure import client_gc
from lab.project import RESULTS_DIR
from lab.results import scratch
from lab.results.jsonio import jsonable, write_json
from lab.results.run_folders import new_run_dir
from lab.store import FULL_TTL, STAMP_NOW, MessageStore, minted_message_id, wall_clock_ms
from lab.workload import to_message

VALUES_FILE = "values.json"
DEFAULT_LOAD_CONCURRENCY = 64
FIGURE_DPI = 110
SCRAP_MIMETYPE = "application/scrapbook.scrap.json+json"
SCRAP_VERSION = 1
KEYSPACE_PREFIX = "lab"
RUN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
_SERVICE_SECRETS = ("kafka_sasl_password", "redis_password")  # LAB_* or the file only, never a parameter


# ---- settings every timed experiment shares ---------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class TimedParams:
    """The settings every experiment that times the cluster from this process shares (its own
    ``Params`` derive from it): the loader-CPU limit above which a round, window or timed read is
    the client's latency (loader-bound, left out and counted), the data seed, whether the keyspace
    outlives the run, and the progress bar."""
    max_loader_cpu_percent_of_core: float = 70.0
    seed: int = 0
    keep_keyspace: bool = False
    show_progress: bool = True


# ---- output -------------------------------------------------------------------------------
def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _glue(name: str, value: Any) -> None:
    """What ``scrapbook.glue(name, value)`` emits (a JSON scrap ``scrapbook.read_notebook``
    reads back), without importing scrapbook in the kernel: its import pulls jsonschema's
    format checkers, 5-15 s per notebook on a busy machine."""
    from IPython.display import display

    payload = {"name": name, "data": value, "encoder": "json", "version": SCRAP_VERSION}
    display({SCRAP_MIMETYPE: payload}, raw=True, metadata={"scrapbook": {"name": name, "data": True, "display": False}})


class Output:
    """One notebook's result folder. ``value`` rewrites values.json at once, so a notebook that
    fails half-way still leaves what it measured before failing."""

    def __init__(self, directory: Path | str) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / VALUES_FILE
        self.values: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}

    @classmethod
    def for_notebook(cls, notebook: str, out_dir: str | Path | None = None, results: Path = RESULTS_DIR, *,
                     run_name: str | None = None) -> Output:
        """``out_dir`` as given (papermill runs); else ``results/<run_name>/<notebook>/`` (a named
        run: the notebooks of one investigation together, a rerun replacing that notebook's
        results); else a fresh ``results/<run-id>/<notebook>/``."""
        if out_dir:
            return cls(Path(out_dir))
        if run_name is None:
            return cls(new_run_dir(results) / notebook)
        if not isinstance(run_name, str) or not RUN_NAME.fullmatch(run_name):
            raise ValidationError(f"run_name must be a folder name (letters, digits, '.', '_', '-'; not starting "
                                  f"with '.' or '-'), got {run_name!r}", run_name=run_name)
        folder = Path(results) / run_name / notebook
        if folder.exists():
            print(f"replacing the {notebook} results of run {run_name} ({folder})")
            shutil.rmtree(folder)
        return cls(folder)

    def value(self, name: str, value: Any) -> Any:
        value = jsonable(value)
        self.values[name] = value
        write_json(self.dir / VALUES_FILE, self.values, sort_keys=True)
        if _in_kernel() and value is not None:  # scrapbook's scrap schema has no null: a None would break reading
            _glue(name, value)
        return value

    def record(self, values: Mapping[str, Any]) -> None:
        for name, value in values.items():
            self.value(name, value)

    def table(self, df: pd.DataFrame, name: str) -> Path:
        df.to_csv(self.dir / f"{name}.csv", index=False)
        flat = df.copy()
        for col in flat.columns:  # Parquet wants one type per column
            if flat[col].dtype == object:
                flat[col] = flat[col].map(lambda v: v if v is None or isinstance(v, str) else json.dumps(jsonable(v)))
        flat.to_parquet(self.dir / f"{name}.parquet", index=False)
        return self.dir / f"{name}.csv"

    def figure(self, fig: Any, name: str) -> Path:
        path = self.dir / f"{name}.png"
        fig.savefig(path, dpi=FIGURE_DPI, bbox_inches="tight")
        return path

    def markdown(self, text: str, name: str = "conclusion") -> str:
        (self.dir / f"{name}.md").write_text(text + "\n")
        self.value(name, text)
        return text


# ---- cluster ------------------------------------------------------------------------------
def cluster_config(cluster: Mapping[str, Any] | None = None, config_file: str | None = None,
                   env: Mapping[str, str] | None = None) -> ClusterConfig:
    """The notebook's cluster settings: ``cluster`` (ClusterConfig fields) over ``LAB_*``
    variables of ``env`` (the notebook passes ``os.environ``) over ``config_file``."""
    env = dict(env or {})
    flags = {k: v for k, v in dict(cluster or {}).items() if v is not None and k != "password"}
    if "lab_home" not in flags and env.get("LAB_HOME"):  # what `lab jupyter --home` exports to its kernels
        flags["lab_home"] = env["LAB_HOME"]
    return load_config(flags=flags, env=env, toml_path=config_file)


def services_config(services: Mapping[str, Any] | None = None, config_file: str | None = None,
                    env: Mapping[str, str] | None = None) -> ServicesConfig:
    """The notebook's outbox and hot-window settings: ``services`` (ServicesConfig fields) over
    ``LAB_*`` variables of ``env`` over the ``[services]`` table of ``config_file``, as ``lab bench
    store`` reads them; passwords only from ``LAB_*`` or the file."""
    flags = {k: v for k, v in dict(services or {}).items() if v is not None and k not in _SERVICE_SECRETS}
    return load_services(flags=flags, env=dict(env or {}), toml_path=config_file)


def constants_from(path: str | None = None, **overrides: Any) -> Constants:
    constants = load_constants(Path(path)) if path else load_constants()
    return constants.replace(**overrides) if overrides else constants


@dataclass
class Testbed:
    """A connection, the admin adapter matching the server, the config they came from, and the
    services (outbox, hot window) the experiment's stores open with."""

    config: ClusterConfig
    connection: Any
    admin: Any
    services: ServicesConfig = field(default_factory=ServicesConfig)

    def environment(self) -> dict[str, Any]:
        """What a notebook's environment block records: the server, the store's parts, this
        process's cyclic GC (``client_gc``: :func:`open_testbed` applies it) and the emulated round trip."""
        return {"server": self.connection.server_kind(), "server_version": self.connection.server_version(),
                "admin": self.admin.name, "services": self.services.describe_run(),
                "rtt_us": self.config.rtt_us}   # the emulated round trip every latency crossed (0: none)

    def settle_client_gc(self) -> None:
        """This process's collector as the services' ``client_gc`` says, again, now that a later
        set-up phase is done (lab.measure.client_gc.settle): an experiment that drives calls and
        reads this process's CPU (the load generator's) calls it once its rows are seeded, as
        ``lab bench store`` and the load processes do, so the loader CPU it reports is measured as
        theirs is."""
        client_gc.settle(self.services.client_gc)

    def close(self) -> None:
        self.admin.close()
        self.connection.close()


@contextlib.contextmanager
def open_testbed(config: ClusterConfig, services: ServicesConfig | None = None) -> Iterator[Testbed]:
    conn = connect(config)
    try:
        testbed = Testbed(config=config, connection=conn, admin=admin_for(config, conn),
                          services=services if services is not None else ServicesConfig())
    except BaseException:
        conn.close()
        raise
    # the kernel (or test session) gets its own collector back once the testbed closes
    with client_gc.restored():
        try:
            testbed.settle_client_gc()
            yield testbed
        finally:
            testbed.close()


def scratch_name(experiment: str) -> str:
    return scratch.scratch_name(f"{KEYSPACE_PREFIX}_{experiment}")


def drop_keyspace(testbed: Testbed, keyspace: str) -> None:
    scratch.drop_keyspace(testbed.connection, keyspace)


@contextlib.contextmanager
def scratch_store(testbed: Testbed, keyspace: str, *, constants: Constants | None = None, keep: bool = False,
                  state_dir: Path | None = None, tables: Sequence[tuple[Any, tuple[str, ...]]] | None = None
                  ) -> Iterator[Any]:
    """A MessageStore on a fresh keyspace with the six tables; dropped afterwards unless ``keep``.

    ``tables``: only these, each a :class:`lab.store.TableSpec` (the design's, changed) with the
    option text its DDL adds; the store's other tables are not created (an experiment that
    writes three of them saves the schema changes of the rest)."""

    with contextlib.ExitStack() as stack:
        if state_dir is None:
            state_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lab-store-")))
        store = MessageStore.open(testbed.config.replace(keyspace=keyspace), constants=constants,
                                  state_dir=state_dir, connection=testbed.connection,
                                  **testbed.services.store_options())
        stack.callback(store.close)
        try:
            if tables is None:
                store.create_schema()
            else:
                testbed.connection.create_keyspace(keyspace, testbed.config.replication_map())
                for spec, options in tables:
                    testbed.connection.execute(spec.ddl(keyspace, extra_options=tuple(options)))
                testbed.connection.wait_schema_agreement()
            yield store
        finally:
            if not keep:
                drop_keyspace(testbed, keyspace)


# ---- loading ------------------------------------------------------------------------------
def progress(iterable: Iterable[Any], *, total: int | None = None, desc: str = "", enabled: bool = True) -> Iterable[Any]:
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, mininterval=0.5)


class RecordLoader:
    """Bulk-writes workload rows at their own coordinates through the store's seeding API
    (``store.seeding.write``: sealed with the store's DEKs, message_record + message_index with the
    full TTL of each row's retention class, plus the client_dedup row as the send path leaves it
    unless ``dedup=False``). No LWT and no conversation_seq allocation, so the dataset's own seqs
    (and holes) land as generated; concurrent, so a few thousand rows load in seconds.

    message_ids: by default (created_at, node 1, row), which readers recompute
    (``compose_message_id``); ``minted_ids=True`` gives each row an id shaped as the store's
    allocator mints it when the row is written (``minted_message_id``: the time part now, the
    counter a random 62-bit value drawn from ``seed``), for measurements of bytes on disk (b_row):
    the default ids' zero counter bytes compress away where a sent row's random ones do not, and
    their time parts spread over the dataset's months share fewer leading bytes than the ids of
    rows written within seconds of each other, as sent rows are."""

    def __init__(self, store: Any, *, concurrency: int = DEFAULT_LOAD_CONCURRENCY, dedup: bool = True,
                 minted_ids: bool = False) -> None:
        self.store = store
        self.concurrency = concurrency
        self.dedup = dedup
        self.minted_ids = minted_ids

    def load(self, messages: pd.DataFrame, *, seed: int, show_progress: bool = False, desc: str = "load") -> int:
        """Write every row, each stamped with its own write time; returns the number written."""

        rows = messages.to_dict("records")
        draw = random.Random(seed).getrandbits

        def message_id(row: dict[str, Any]) -> int | None:
            if not self.minted_ids:
                return None
            return minted_message_id(time_ms=wall_clock_ms(), node_id=1, random_bits=draw)

        built = (to_message(row, seed=seed, message_id=message_id(row))
                 for row in progress(rows, total=len(rows), desc=desc, enabled=show_progress))
        return self.store.seeding.write(built, ttl_seconds=FULL_TTL, timestamp_us=STAMP_NOW,
                                        dedup=self.dedup, concurrency=self.concurrency)


def single_partition_rows(messages: pd.DataFrame, *, rows: int, first_seq: int, conversation_id: str,
                          bucket_width: int) -> pd.DataFrame:
    """``rows`` workload rows re-addressed into one conversation, consecutive seqs from
    ``first_seq`` (one partition when they fit in a bucket)."""
    if len(messages) < rows:
        reps = -(-rows // len(messages))
        messages = pd.concat([messages] * reps, ignore_index=True)
    out = messages.iloc[:rows].copy()
    seqs = np.arange(first_seq, first_seq + rows, dtype=np.int64)
    out["conversation_id"] = conversation_id
    out["tenant_id"] = messages["tenant_id"].iloc[0]
    out["conversation_seq"] = seqs
    out["seq_bucket"] = seqs // bucket_width
    out["reply_to_conversation_seq"] = pd.array([pd.NA] * rows, dtype="Int64")
    out["row"] = np.arange(rows, dtype=np.int64) + int(messages["row"].max()) + 1
    out["client_message_id"] = [f"{conversation_id}-{s}" for s in seqs]
    return out

