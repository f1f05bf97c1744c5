"""lab.load.templates: the seeder's templates reach the Locust process whole, without pandas."""
from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from lab.load.plan import LoadPlan, load_profile, message_templates
from lab.load.templates import build_templates, templates_path, worker_templates


def _plan(tmp_path, profile: str = "chat", index: int = 1) -> LoadPlan:
    return LoadPlan(run_id="r", load_dir=tmp_path / "load", state_root=tmp_path / "state", profile=profile,
                    users=2, workers=2, worker_index=index)


def test_the_file_holds_what_message_templates_builds(tmp_path):
    plan = _plan(tmp_path)
    built = build_templates(plan)
    assert templates_path(plan).is_file()
    assert built == tuple(message_templates(load_profile("chat").content, seed=1))
    assert worker_templates(plan) == built
    assert worker_templates(_plan(tmp_path, index=0)) != built  # each worker its own seed, its own file


def test_no_file_or_another_profiles_file_is_built_here(tmp_path):
    plan = _plan(tmp_path)
    assert worker_templates(plan) == tuple(message_templates(load_profile("chat").content, seed=1))
    assert templates_path(plan).is_file()
    other = _plan(tmp_path, profile="send_only")
    assert worker_templates(other) == tuple(message_templates(load_profile("send_only").content, seed=1))


@pytest.mark.spawns
def test_the_locust_process_reads_the_file_without_importing_pandas(tmp_path):
    plan = _plan(tmp_path)
    build_templates(plan)
    code = ("import sys; from pathlib import Path; from lab.load.plan import LoadPlan; "
            "import lab.load.locust.runtime; from lab.load.templates import worker_templates; "
            f"p = LoadPlan(run_id='r', load_dir=Path({str(plan.load_dir)!r}), state_root=Path('.'), "
            "profile='chat', users=2, workers=2, worker_index=1); "
            "n = len(worker_templates(p)); print(n, 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(len(build_templates(plan))), "False"]


def test_a_seed_gated_process_reads_the_seed_once_the_runner_says_it_is_on_disk(tmp_path):
    """lab load seeds while its Locust processes start: what they know of the seed (the
    conversations' acked messages) is read after ``seeded`` appears, not when they start."""
    import threading
    import uuid

    from lab.load.audit import Ack, AckLog
    from lab.load.locust.runtime import LoadContext

    plan = LoadPlan(run_id="r", load_dir=tmp_path / "load", state_root=tmp_path / "state", profile="chat",
                    users=2, workers=1, seed_size="tiny", seed_gate=True)
    ctx = LoadContext(plan, env={})
    assert not any(c.messages for c in ctx.conversations.values())  # nothing seeded yet
    group = ctx.keys.big_group
    log = AckLog(ctx.acks_path)
    for seq in (1, 2, 3):
        log.append(Ack(phase="seed", tenant_id=ctx.keys.tenant_id, conversation_id=group, conversation_seq=seq,
                       message_id=seq, client_message_id=f"seed-{seq}", sender_id=uuid.uuid4()))
    log.close()
    timer = threading.Timer(0.3, plan.seeded_path().write_text, args=("",))
    timer.start()
    ctx._wait_for_seed()
    assert plan.seeded_path().exists()
    ctx._read_seed_acks()
    assert ctx.conversations[group].messages == [(1, 1), (2, 2), (3, 3)]
    ungated = LoadContext(dataclasses.replace(plan, seed_gate=False), env={})  # the web UI: seeded before
    assert ungated.conversations[group].messages == [(1, 1), (2, 2), (3, 3)]
