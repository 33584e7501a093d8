#!/usr/bin/env python3
"""How long a user waits for whole `hbtui` commands, against baselines in the same run.

    .venv/bin/python tests/bench/cli.py [--runs N] [--verify-mib N]

Every figure is a whole process started the way a shell starts it (fork+exec,
output to a pipe), median of N runs, against the real bundled smolvm engine with
an empty state dir:

  version   `hbtui --version`          vs `python3 -c pass` (the interpreter alone)
  ls        `hbtui ls --json`          vs the engine's own `machine ls --json`
  verify    `hbtui verify` on an .hbx  vs `gpg -d` of the same payload (default 1 GiB)

The installed package carries bytecode (pip compiles it); an editable checkout
under PYTHONDONTWRITEBYTECODE would not, so the package is compiled first to
measure what an installed hbtui costs.

Prints a table; the LAST line is one JSON object: version_ms, ls_vs_engine,
verify_vs_gpg and the raw milliseconds.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import hbtui_bin, log  # tests/bench/common.py, beside this script

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from hbtui.archive import files as AF  # noqa: E402
from hbtui.engine import locate_engine  # noqa: E402

MiB = 1 << 20
PASS = b"bench passphrase, not a secret"


def median_ms(
    argv: list[str], env: dict[str, str], runs: int, *, stdin_bytes: bytes | None = None
) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        done = subprocess.run(
            argv, env=env, input=stdin_bytes, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        times.append(time.perf_counter() - t0)
        if done.returncode != 0:
            raise SystemExit(f"{argv[0]} failed: {done.stderr.decode(errors='replace')[-500:]}")
    return statistics.median(times) * 1000


def make_payload_archives(root: Path, mib: int, gnupghome: Path) -> tuple[Path, Path]:
    """The same incompressible payload as .hbx and as gpg (AES256, no compression)."""
    payload = root / "payload.bin"
    with open(payload, "wb") as f:
        for _ in range(mib // 8):
            f.write(os.urandom(8 * MiB))
    hbx = root / "payload.hbx"
    with AF.create_archive(hbx, PASS) as enc, open(payload, "rb") as src:
        enc.feed_from(src)
        enc.finish()
    gpg = root / "payload.gpg"
    r, w = os.pipe()
    os.write(w, PASS + b"\n")
    os.close(w)
    subprocess.run(
        [
            "gpg", "--homedir", str(gnupghome), "--batch", "--yes", "--quiet",
            "--pinentry-mode", "loopback", "--passphrase-fd", str(r),
            "--symmetric", "--cipher-algo", "AES256", "--compress-algo", "none",
            "-o", str(gpg), str(payload),
        ],
        pass_fds=(r,),
        check=True,
    )  # fmt: skip
    os.close(r)
    payload.unlink()
    return hbx, gpg


def gpg_decrypt_argv(gnupghome: Path, archive: Path) -> list[str]:
    return [
        "gpg", "--homedir", str(gnupghome), "--batch", "--quiet", "--pinentry-mode", "loopback",
        "--no-symkey-cache", "--passphrase-fd", "0", "-d", "-o", "/dev/null", str(archive),
    ]  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--verify-mib", type=int, default=1024, help="payload size for verify")
    ap.add_argument("--verify-runs", type=int, default=3)
    args = ap.parse_args()
    if shutil.which("gpg") is None:
        log("missing tool: gpg")
        return 2
    compileall.compile_dir(str(ROOT / "hbtui"), quiet=1)
    hbtui = hbtui_bin()
    engine = locate_engine().path

    root = Path(tempfile.mkdtemp(prefix="hbtui-bench-cli-"))
    try:
        state = root / "engine-state"
        state.mkdir()
        env = dict(os.environ, HBTUI_HOME=str(root / "home"), HBTUI_SMOLVM_STATE_DIR=str(state))
        env.pop("HBTUI_SMOLVM", None)
        env.pop("HBTUI_PASSPHRASE", None)
        r: dict[str, float] = {}
        subprocess.run([hbtui, "ls", "--json"], env=env, capture_output=True)  # warm the cache
        r["python_pass_ms"] = median_ms([sys.executable, "-c", "pass"], env, args.runs)
        r["version_ms"] = median_ms([hbtui, "--version"], env, args.runs)
        r["engine_ls_ms"] = median_ms(
            [engine, "--state-dir", str(state), "machine", "ls", "--json"], env, args.runs
        )
        r["ls_ms"] = median_ms([hbtui, "ls", "--json"], env, args.runs)

        gnupghome = root / "gnupg"
        gnupghome.mkdir(mode=0o700)
        log(f"writing a {args.verify_mib} MiB payload as .hbx and as gpg ...")
        hbx, gpg = make_payload_archives(root, args.verify_mib, gnupghome)
        venv = dict(env, HBTUI_PASSPHRASE=PASS.decode())
        r["verify_ms"] = median_ms([hbtui, "verify", str(hbx)], venv, args.verify_runs)
        r["gpg_d_ms"] = median_ms(
            gpg_decrypt_argv(gnupghome, gpg), env, args.verify_runs, stdin_bytes=PASS + b"\n"
        )

        result = {
            "version_ms": round(r["version_ms"], 1),
            "version_vs_python": round(r["version_ms"] / r["python_pass_ms"], 2),
            "ls_vs_engine": round(r["ls_ms"] / r["engine_ls_ms"], 2),
            "verify_vs_gpg": round(r["gpg_d_ms"] / r["verify_ms"], 2),
            **{k: round(v, 1) for k, v in r.items() if k != "version_ms"},
        }
        rows = [
            ("python3 -c pass", r["python_pass_ms"]),
            ("hbtui --version", r["version_ms"]),
            ("smolvm machine ls --json", r["engine_ls_ms"]),
            ("hbtui ls --json", r["ls_ms"]),
            (f"gpg -d ({args.verify_mib} MiB)", r["gpg_d_ms"]),
            (f"hbtui verify ({args.verify_mib} MiB)", r["verify_ms"]),
        ]
        for label, ms in rows:
            print(f"{label:<32} {ms:9.1f} ms")
        print(json.dumps(result))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
