"""No lost writes: N processes changing one state file at once each keep their change.

Every read-modify-write of a state file (secrets index and store, registry, config hosts,
base manifests, the archive memory) holds a lock across the whole cycle; without it the
last writer's stale copy drops the others' changes (seen: concurrent `secrets set`
lost writes in 12 of 12 rounds)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support import HBTUI_BIN

WRITERS = 6


def _all_at_once(commands: list[list[str]], env: dict[str, str], stdin: bytes = b"") -> None:
    """Start every command before any is waited for; each must succeed."""
    procs = [
        subprocess.Popen(
            cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for cmd in commands
    ]
    for cmd, proc in zip(commands, procs, strict=True):
        out, err = proc.communicate(stdin, timeout=120)
        assert proc.returncode == 0, (cmd, out, err)


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


@pytest.fixture
def env(hbtui_home: Path) -> dict[str, str]:
    import os

    return {
        **os.environ,
        "HBTUI_SECRETS_PASSPHRASE": "concurrent writers",
        # The encrypted file store: the one that rewrites a shared file on each change.
        "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
    }


def _secret_names(env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        [HBTUI_BIN, "secrets", "ls", "--json"], env=env, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return sorted(s["name"] for s in json.loads(done.stdout))


def test_concurrent_secrets_set_and_rm_lose_nothing(env, hbtui_home):
    names = [f"tool{i}" for i in range(WRITERS)]
    (hbtui_home / "config.toml").write_text(
        "".join(
            f'[credentials.{n}]\nenv_var = "{n.upper()}_TOKEN"\nhosts = "api.{n}.example"\n'
            for n in names
        )
    )
    _all_at_once([[HBTUI_BIN, "secrets", "set", n] for n in names], env, b"value-of-it\n")
    assert _secret_names(env) == names
    # Every value is in the encrypted file too, not only its name in the index.
    check = _python(
        """
        from hbtui.config import load_config
        from hbtui.core.keys.secrets import SecretStore
        from hbtui.paths import resolve_paths
        paths = resolve_paths()
        secrets = SecretStore(paths, load_config(paths), lambda confirm: b"concurrent writers")
        print(sorted(n for n in secrets.names() if secrets.get(n) == "value-of-it"))
        """
    )
    done = subprocess.run(check, env=env, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == repr(names), done.stderr
    _all_at_once([[HBTUI_BIN, "secrets", "rm", n] for n in names[::2]], env)
    assert _secret_names(env) == names[1::2]


def test_concurrent_hosts_add_lose_nothing(env):
    names = [f"h{i}" for i in range(WRITERS)]
    _all_at_once([[HBTUI_BIN, "hosts", "add", n, "--ssh", f"me@{n}.example"] for n in names], env)
    done = subprocess.run(
        [HBTUI_BIN, "hosts", "ls", "--json"], env=env, capture_output=True, timeout=60
    )
    assert sorted(h["name"] for h in json.loads(done.stdout)) == names
    _all_at_once([[HBTUI_BIN, "hosts", "rm", n] for n in names[:3]], env)
    done = subprocess.run(
        [HBTUI_BIN, "hosts", "ls", "--json"], env=env, capture_output=True, timeout=60
    )
    assert sorted(h["name"] for h in json.loads(done.stdout)) == names[3:]


def test_concurrent_registry_transactions_lose_nothing(env, hbtui_home):
    rows = 20
    writer = f"""
        import asyncio, sys
        from hbtui.core.foundation.registry import BoxRecord, Registry
        from hbtui.paths import resolve_paths
        w = int(sys.argv[1])
        registry = Registry(resolve_paths().registry_file)
        async def main():
            for i in range({rows}):
                async with registry.transaction() as boxes:
                    boxes.put(BoxRecord(name=f"w{{w}}-{{i}}", port=20000 + w * 100 + i))
        asyncio.run(main())
    """
    _all_at_once([[*_python(writer), str(w)] for w in range(WRITERS)], env)
    from hbtui.core.foundation.registry import Registry

    kept = {r.name for r in Registry(hbtui_home / "registry.toml").read()}
    assert kept == {f"w{w}-{i}" for w in range(WRITERS) for i in range(rows)}


def test_concurrent_base_builds_each_learn_the_base_they_replaced(env, hbtui_home):
    """Of N manifests put for one base, each replaced exactly one other (or none, the
    first): so no older pack is removed twice and none is left behind."""
    writer = """
        import sys
        from hbtui.core.foundation.basebook import Base, BaseBook
        from hbtui.paths import resolve_paths
        w = sys.argv[1]
        book = BaseBook(resolve_paths().data_dir / "bases")
        base = Base(id="ubuntu-24.04-0123456789ab", host="local", image="ubuntu:24.04",
                    recipe="0123456789ab", recipe_dir="/r", versions="", engine="1.32.2",
                    pack=f"/packs/{w}/base.smolmachine", size=1, sha256="0", created="")
        older = book.put(base)
        print(older.pack if older else "-")
    """
    procs = [
        subprocess.Popen([*_python(writer), str(w)], env=env, stdout=subprocess.PIPE, text=True)
        for w in range(WRITERS)
    ]
    replaced = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert replaced.count("-") == 1, replaced
    packs = {f"/packs/{w}/base.smolmachine" for w in range(WRITERS)}
    final = json.loads(
        (hbtui_home / "bases" / "local" / "ubuntu-24.04-0123456789ab.json").read_text()
    )
    # Every pack but the last one kept was replaced once: a chain, no gaps, no repeats.
    assert sorted(r for r in replaced if r != "-") == sorted(packs - {final["pack"]})


def test_concurrent_archive_marks_lose_nothing(env, tmp_path):
    archives = []
    for w in range(WRITERS):
        path = tmp_path / f"box-{w}.hbx"
        path.write_bytes(b"x" * (w + 1))
        archives.append(path)
    writer = """
        import sys
        from pathlib import Path
        from hbtui.core.archives.backups import is_verified, mark_verified, read_memory
        from hbtui.paths import resolve_paths
        paths = resolve_paths()
        for _ in range(10):
            mark_verified(paths, Path(sys.argv[1]))
    """
    _all_at_once([[*_python(writer), str(a)] for a in archives], env)
    from hbtui.core.archives.backups import is_verified, read_memory
    from hbtui.paths import resolve_paths

    memory = read_memory(resolve_paths())
    assert all(is_verified(memory, a) for a in archives)


def test_a_lock_wait_cancelled_ends_only_when_its_thread_is_done_with_the_fd(tmp_path):
    """Cancelled while its thread waited in flock, a lock wait returned at once and its
    caller closed the fd: the thread then locked whatever file took that fd number."""
    import asyncio
    import fcntl

    from hbtui.statefile import lock_fd

    path = tmp_path / "x.lock"
    holder = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX)
    waiter = os.open(path, os.O_RDWR)

    async def main() -> bool:
        waiting = asyncio.ensure_future(lock_fd(waiter))
        await asyncio.sleep(0)  # the thread is started and waits in flock
        waiting.cancel()
        done, _ = await asyncio.wait([waiting], timeout=0.3)
        ended_while_held = bool(done)
        os.close(holder)  # the holder lets go: the thread takes the lock and returns
        with pytest.raises(asyncio.CancelledError):
            await waiting
        return ended_while_held

    try:
        assert asyncio.run(main()) is False
    finally:
        os.close(waiter)
