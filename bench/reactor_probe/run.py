"""Compare driver reactors under Locust on the plain CQL probe; writes results/<run-id>/bench/reactor.json.

    .venv/bin/python bench/reactor_probe/run.py [--seconds 12] [--users 32] [--rate 400]

Each variant runs twice: closed loop (max throughput, `--users` users with no wait) and open
loop at a fixed total `--rate` (latency check against the plain client at the same rate).
`gevent-3.29.11` needs a throwaway venv (PROBE_VENV_32911, default /tmp/venv-sd32911) with
scylla-driver==3.29.11, locust, hdrhistogram, lz4, psutil; the project venv is never touched.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from lab.measure.hdr import LatencyRecorder, OpStats, merge_stats, percentiles_us  # noqa: E402
from lab.load.pacing import FixedRateSchedule  # noqa: E402
from lab.results.run_folders import new_run_dir  # noqa: E402

HERE = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
VENV_32911 = Path(os.environ.get("PROBE_VENV_32911", "/tmp/venv-sd32911"))
REF_RATE = 40.0  # calls/s of the paired plain reference client
VARIANTS = {  # name: (venv, reactor, processes)
    "libev-3.29.12": (VENV, "libev", 1),
    "asyncio-3.29.12": (VENV, "asyncio", 1),
    "libev-threadpool-3.29.12": (VENV, "libev-threadpool", 1),
    "libev-threadpool-3.29.12-x2proc": (VENV, "libev-threadpool", 2),
    "asyncore-3.29.12": (VENV, "asyncore", 1),
    "gevent-3.29.11": (VENV_32911, "gevent", 1),
    "asyncio-3.29.12-x2proc": (VENV, "asyncio", 2),
    "asyncore-3.29.12-x2proc": (VENV, "asyncore", 2),
    "gevent-3.29.11-x2proc": (VENV_32911, "gevent", 2),
}


class BlackholeProxy(threading.Thread):
    """127.0.0.1:<port> -> the node; ``after`` seconds after the first connection it keeps every socket open and
    forwards nothing more: a server that stops answering (the case that froze libev)."""

    def __init__(self, after: float, target: tuple[str, int] = ("127.0.0.1", 9042)) -> None:
        super().__init__(daemon=True)
        import socket

        self.after, self.target = after, target
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.t0 = time.time()
        self.open: list = []

    def _pump(self, a, b) -> None:
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                while time.time() - self.t0 >= self.after:
                    time.sleep(1)  # blackholed: hold the bytes, answer nothing
                b.sendall(data)
        except OSError:
            pass

    def run(self) -> None:
        import socket

        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            u = socket.create_connection(self.target)
            if not self.open:
                self.t0 = time.time()  # the clock starts with the load generator's first connection
            self.open += [c, u]
            threading.Thread(target=self._pump, args=(c, u), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c), daemon=True).start()

    def close(self) -> None:
        for s in [self.sock] + self.open:
            try:
                s.close()
            except OSError:
                pass


def _tree_cpu(proc: psutil.Process) -> float:
    total = 0.0
    for p in [proc] + proc.children(recursive=True):
        try:
            t = p.cpu_times()
            total += t.user + t.system + getattr(t, "children_user", 0) + getattr(t, "children_system", 0)
        except psutil.NoSuchProcess:
            pass
    return total


def run_locust(name: str, *, seconds: int, users: int, rate: float, out: Path, round_: int = 0,
               blackhole_after: float | None = None) -> dict:
    venv, reactor, procs = VARIANTS[name]
    pout = out / f"{name}-{'rate' if rate else 'max'}-{round_}{'-blackhole' if blackhole_after else ''}"
    env = dict(os.environ, PROBE_REACTOR=reactor, PROBE_OUT=str(pout), PYTHONPATH=str(ROOT),
               PROBE_RATE_PER_USER=str(rate / users if rate else 0))
    proxy = None
    if blackhole_after is not None:
        proxy = BlackholeProxy(blackhole_after)
        proxy.start()
        env["PROBE_PORT"] = str(proxy.port)
    launcher = ([str(venv / "bin" / "python"), str(HERE / "launch_unpatched.py")] if reactor == "libev-threadpool"
                else [str(venv / "bin" / "locust")])
    cmd = launcher + ["-f", str(HERE / "locustfile.py"), "--headless", "-u", str(users),
           "-r", str(users), "-t", f"{seconds}s", "--only-summary", "--json-file", str(pout / "locust"),
           "--stop-timeout", "5"]
    if procs > 1:
        cmd += ["--processes", str(procs)]
    pout.mkdir(parents=True, exist_ok=True)
    # The paired reference: a light fixed-rate plain client against the same node at the same
    # time. Its latency is what the server gave; the variant's excess over it is the load
    # generator's own (reactor) delay, which the shared, noisy node cannot fake.
    ref_threads, ref_recs = _plain_threads(seconds=seconds - 4, users=4, rate=REF_RATE, delay=3) \
        if proxy is None else ([], [])
    t0 = time.time()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=open(pout / "stderr.txt", "w"))
    ps = psutil.Process(proc.pid)
    cpu = 0.0
    try:
        while proc.poll() is None:
            cpu = max(cpu, _tree_cpu(ps))
            time.sleep(0.5)
            if time.time() - t0 > seconds + 60:
                proc.kill()  # a frozen load generator: record it, do not wait forever
                break
    except psutil.NoSuchProcess:
        pass
    wall = time.time() - t0
    if proxy is not None:
        proxy.close()
    for t in ref_threads[:-1]:
        t.join()
    ref = OpStats()
    for stats in merge_stats(r.totals for r in ref_recs).values():
        ref.merge(stats)
    parts = []
    for f in pout.glob("probe-*.json"):
        d = json.loads(f.read_text())
        parts.append({op: OpStats.from_json(v) for op, v in d["totals"].items()})
    row = _result(name, merge_stats(parts), seconds=seconds, cpu=cpu, wall=wall, rc=proc.returncode,
                  rate=rate, users=users, processes=procs)
    row["reference_service_us"] = percentiles_us(ref.service)
    row["wall_seconds"] = round(wall, 1)
    row["blackhole_after"] = blackhole_after
    row["errors_by_type"] = {}
    for part in parts:
        for st in part.values():
            for k, v in st.errors.items():
                row["errors_by_type"][k] = row["errors_by_type"].get(k, 0) + v
    return row


def _result(name, stats, *, seconds, cpu, wall, rc, rate, users, processes) -> dict:
    allops = OpStats()
    for s in stats.values():
        allops.merge(s)
    return {"variant": name, "mode": "fixed-rate" if rate else "closed-loop", "users": users,
            "processes": processes, "requested_rate": rate or None, "seconds": seconds, "exit_code": rc,
            "calls": allops.count, "errors": sum(allops.errors.values()),
            "throughput": round(allops.count / seconds, 1),
            "loadgen_cpu_seconds": round(cpu, 1),
            "loadgen_cpu_ms_per_call": round(1000 * cpu / allops.count, 3) if allops.count else None, "loadgen_cpu_percent_of_one_core": round(100 * cpu / wall, 1),
            "service_us": percentiles_us(allops.service),
            "corrected_us": percentiles_us(allops.corrected) if rate else None}


def _plain_threads(*, seconds: float, users: int, rate: float, delay: float = 0.0) -> tuple[list, list]:
    """Threads issuing the probe calls (default libev reactor, no gevent); returns (threads, recorders)."""
    from cassandra.cluster import Cluster

    cluster = Cluster(["127.0.0.1"], protocol_version=4)
    s = cluster.connect("loadprobe")
    w = s.prepare("INSERT INTO kv (k, v) VALUES (?, ?)")
    r = s.prepare("SELECT v FROM kv WHERE k = ?")
    recs = [LatencyRecorder(fixed_rate=bool(rate)) for _ in range(users)]
    begin = time.perf_counter_ns() + int(delay * 1e9)
    stop = begin + int(seconds * 1e9)

    def worker(rec: LatencyRecorder) -> None:
        if delay:
            time.sleep(delay)
        sched = FixedRateSchedule.for_rate(rate / users, start_ns=begin,
                                           phase=random.random()) if rate else None
        k = 0
        while True:
            due = None
            if sched:
                due = sched.due_ns(k)
                k += 1
                if due >= stop:
                    return
                d = (due - time.perf_counter_ns()) / 1e9
                if d > 0:
                    time.sleep(d)
            elif time.perf_counter_ns() >= stop:
                return
            op = "write" if random.random() < 0.5 else "read"
            key = random.randrange(100_000)
            t = time.perf_counter_ns()
            err = None
            try:
                s.execute(w, (key, b"x" * 100)) if op == "write" else s.execute(r, (key,))
            except Exception as exc:
                err = type(exc).__name__
            rec.record(op, started_ns=t, ended_ns=time.perf_counter_ns(), due_ns=due, error=err)

    threads = [threading.Thread(target=worker, args=(rec,)) for rec in recs]
    threads.append(threading.Thread(target=lambda: (time.sleep(delay + seconds + 6), cluster.shutdown())))
    for t in threads:
        t.start()
    return threads, recs


def run_plain(*, seconds: int, users: int, rate: float) -> dict:
    """The baseline: the same calls from real threads, default (libev) reactor, no gevent."""
    me = psutil.Process()
    cpu0 = sum(me.cpu_times()[:2])
    t0 = time.time()
    threads, recs = _plain_threads(seconds=seconds, users=users, rate=rate)
    for t in threads[:-1]:
        t.join()
    wall = time.time() - t0
    cpu = sum(me.cpu_times()[:2]) - cpu0
    return _result("plain-threads-libev", merge_stats(r.totals for r in recs), seconds=seconds, cpu=cpu,
                   wall=wall, rc=0, rate=rate, users=users, processes=1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=12)
    ap.add_argument("--users", type=int, default=32)
    ap.add_argument("--rate", type=float, default=400.0)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--repeat", type=int, default=1, help="interleaved rounds (the node is shared: noisy)")
    ap.add_argument("--blackhole-after", type=float, default=None,
                    help="freeze test: the node stops answering after this many seconds (closed loop only)")
    args = ap.parse_args()
    from cassandra.cluster import Cluster

    cluster = Cluster(["127.0.0.1"], protocol_version=4)  # the probe's own small keyspace
    s = cluster.connect()
    s.execute("CREATE KEYSPACE IF NOT EXISTS loadprobe WITH replication = "
              "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE IF NOT EXISTS loadprobe.kv (k bigint PRIMARY KEY, v blob)")
    cluster.shutdown()
    out = new_run_dir(ROOT / "results") / "bench"
    out.mkdir()
    rows = []
    names = args.only or ["plain"] + list(VARIANTS)
    for round_, name in [(i, n) for i in range(args.repeat) for n in names]:
        for rate in ((0.0,) if args.blackhole_after else (0.0, args.rate)):
            if args.blackhole_after is not None:
                row = run_locust(name, seconds=args.seconds, users=args.users, rate=0.0, out=out / "raw",
                                 round_=round_, blackhole_after=args.blackhole_after)
                print(json.dumps({k: row.get(k) for k in ("variant", "calls", "errors", "errors_by_type",
                                                          "exit_code", "wall_seconds")}), flush=True)
                rows.append(row)
                continue
            if name == "plain":
                row = run_plain(seconds=args.seconds, users=args.users, rate=rate)
            else:
                row = run_locust(name, seconds=args.seconds, users=args.users, rate=rate, out=out / "raw", round_=round_)
            row["round"] = round_
            rows.append(row)
            print(json.dumps({k: row[k] for k in ("variant", "mode", "throughput", "errors", "exit_code",
                                                  "loadgen_cpu_percent_of_one_core", "loadgen_cpu_ms_per_call")}
                             | {"p50": row["service_us"]["p50"], "p99": row["service_us"]["p99"],
                                "co_p99": (row["corrected_us"] or {}).get("p99"),
                                "ref_p50": (row.get("reference_service_us") or {}).get("p50"),
                                "ref_p99": (row.get("reference_service_us") or {}).get("p99")}), flush=True)
    (out / "reactor.json").write_text(json.dumps({"parameters": vars(args), "runs": rows}, indent=2))
    print(out / "reactor.json")


if __name__ == "__main__":
    main()
