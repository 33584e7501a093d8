#!/usr/bin/env python3
"""Benchmark hbtui archives against the old gpg pipeline, all on the same data.

    .venv/bin/python tests/bench/archive.py [--dir DIR] [--keep]

Builds a /data-like tree (256 MiB incompressible + 256 MiB text-like files) in a
temporary folder (DIR, default the system temp dir: the "same disk" for every
writer), then measures:

  encrypt   hbtui Encryptor vs `gpg --symmetric --cipher-algo AES256` vs `cat`,
            on the 256 MiB incompressible file, each writing a file beside it;
  save      `tar | zstd -T0 | hbtui encrypt` vs the old `tar czf | gpg --symmetric`;
  rss       peak RSS of an encryptor subprocess fed 1 GiB from a generator;
  verify    hbtui verify (authenticate every chunk) vs `gpg -d` on the same payload.

hbtui's KDF (Argon2id, 64 MiB, ~0.12 s) is a fixed cost per archive, not a
throughput: encrypt/verify ratios use the streaming time after the header (the
KDF time is printed separately, and end-to-end ratios too). The save pipeline
ratio is end to end, KDF included. gpg is measured as a whole process.

Prints a table; the LAST line is one JSON object with the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import contextlib

from hbtui.archive import stream as AS
from hbtui.archive.hbxtar import pack_dir

MiB = 1 << 20
RANDOM_BYTES = 256 * MiB
TEXT_BYTES = 256 * MiB
PASS = b"bench passphrase, not a secret"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- data ------------------------------------------------------------------


def build_tree(root: Path) -> Path:
    data = root / "data"
    (data / "blobs").mkdir(parents=True)
    with open(data / "blobs" / "disk.img", "wb") as f:
        for _ in range(RANDOM_BYTES // (8 * MiB)):
            f.write(os.urandom(8 * MiB))
    rng = random.Random(1234)
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    vocab = ["".join(rng.choices(letters, k=rng.randint(2, 10))) for _ in range(8000)]
    vocab += [
        "def",
        "return",
        "self",
        "import",
        "class",
        "if",
        "else",
        "for",
        "in",
        "None",
        "(",
        ")",
        ":",
        "=",
        "{",
        "}",
    ]
    words = rng.choices(vocab, k=3_000_000)
    lines = [" ".join(words[i : i + rng.randint(4, 14)]) for i in range(0, len(words), 9)]
    pool = ("\n".join(lines) + "\n").encode()
    per_file = 256 * 1024
    n_files = TEXT_BYTES // per_file
    for i in range(n_files):
        d = data / "src" / f"pkg{i % 32:02d}" / f"mod{i % 7}"
        d.mkdir(parents=True, exist_ok=True)
        off = rng.randrange(0, len(pool) - per_file)
        body = f"# file {i} {rng.random()}\n".encode() + pool[off : off + per_file]
        (d / f"file{i:04d}.py").write_bytes(body[:per_file])
    return data


# --- timing helpers -----------------------------------------------------------


def timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def gpg_argv(gnupghome: Path, fd: int, *rest: str) -> list[str]:
    return [
        "gpg",
        "--homedir",
        str(gnupghome),
        "--batch",
        "--yes",
        "--quiet",
        "--pinentry-mode",
        "loopback",
        "--no-symkey-cache",
        "--passphrase-fd",
        str(fd),
        *rest,
    ]


def run_gpg(gnupghome: Path, *rest: str, stdin=None, stdout=None) -> None:
    r, w = os.pipe()
    os.write(w, PASS + b"\n")
    os.close(w)
    try:
        subprocess.run(
            gpg_argv(gnupghome, r, *rest), pass_fds=(r,), check=True, stdin=stdin, stdout=stdout
        )
    finally:
        os.close(r)


def rm(p: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        p.unlink()


def ours_encrypt(src: Path, dst: Path) -> tuple[float, float]:
    """(kdf seconds, streaming seconds), writing a file like gpg and cat do."""
    with open(src, "rb", buffering=0) as fin, open(dst, "wb", buffering=0) as fout:
        t0 = time.perf_counter()
        enc = AS.Encryptor(fout, PASS)
        t1 = time.perf_counter()
        enc.feed_from(fin)
        enc.finish()
        t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def ours_verify(src: Path) -> tuple[float, float]:
    with open(src, "rb", buffering=0) as fin:
        t0 = time.perf_counter()
        dec = AS.Decryptor(fin, PASS)
        t1 = time.perf_counter()
        for _ in dec.chunks():
            pass
        t2 = time.perf_counter()
    assert dec.complete
    return t1 - t0, t2 - t1


RSS_CHILD = textwrap.dedent(
    """
    import io, os, resource, sys
    sys.path.insert(0, sys.argv[1])
    from hbtui.archive import header as AH, stream as AS

    TOTAL = 1 << 30
    block = os.urandom(AH.DEFAULT_CHUNK_SIZE)

    class Gen(io.RawIOBase):
        left = TOTAL
        def readable(self): return True
        def readinto(self, b):
            n = min(len(b), self.left, len(block))
            b[:n] = block[:n]
            self.left -= n
            return n

    def hwm():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return -1.0

    with open(os.devnull, "wb", buffering=0) as out:
        enc = AS.Encryptor(out, b"rss bench")          # runs the default KDF
        after_kdf = hwm()
        try:
            with open("/proc/self/clear_refs", "w") as f:  # reset VmHWM to the current RSS
                f.write("5")
            reset = True
        except OSError:
            reset = False
        before = hwm()
        enc.feed_from(Gen())
        enc.finish()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, after_kdf, before, hwm(), int(reset))
    """
)


def main() -> int:  # noqa: C901 (named in pyproject.toml)
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--dir", help="where to build the test tree (default: system temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    for tool in ("gpg", "tar", "zstd", "gzip", "cat"):
        if shutil.which(tool) is None:
            print(f"missing tool: {tool}", file=sys.stderr)
            return 2

    root = Path(tempfile.mkdtemp(prefix="hbtui-bench-", dir=args.dir))
    gnupghome = root / "gnupg"
    gnupghome.mkdir(mode=0o700)
    rows: list[tuple[str, str, str]] = []
    res: dict[str, float] = {}
    try:
        t0 = time.perf_counter()
        data = build_tree(root)
        payload = data / "blobs" / "disk.img"
        size = payload.stat().st_size
        log(f"tree built in {time.perf_counter() - t0:.1f}s at {root}")
        out = root / "out.bin"

        # --- encrypt -------------------------------------------------------------
        kdf_times, stream_times = [], []
        for _ in range(args.runs):
            rm(out)
            k, s = ours_encrypt(payload, out)
            kdf_times.append(k)
            stream_times.append(s)
        ours_arc = root / "payload.hbx"
        os.replace(out, ours_arc)

        def gpg_enc(*extra: str) -> None:
            rm(out)
            run_gpg(
                gnupghome,
                "--symmetric",
                "--cipher-algo",
                "AES256",
                *extra,
                "-o",
                str(out),
                str(payload),
            )

        gpg_times = timed(lambda: gpg_enc("--compress-algo", "none"), args.runs)
        gpg_arc = root / "payload.gpg"
        os.replace(out, gpg_arc)
        gpg_z_times = timed(lambda: gpg_enc(), 1)  # gpg's default: ZIP compression on
        rm(out)

        def cat() -> None:
            with open(out, "wb") as f:
                subprocess.run(["cat", str(payload)], stdout=f, check=True)

        cat_times = timed(cat, args.runs)
        rm(out)

        def mibs(t: float, n: int = size) -> float:
            return n / MiB / t

        ours_bw = mibs(min(stream_times))
        ours_e2e = mibs(min(k + s for k, s in zip(kdf_times, stream_times, strict=False)))
        gpg_bw = mibs(min(gpg_times))
        gpgz_bw = mibs(min(gpg_z_times))
        cat_bw = mibs(min(cat_times))
        rows += [
            (
                "encrypt: hbtui (streaming)",
                f"{ours_bw:8.0f} MiB/s",
                f"KDF {min(kdf_times):.2f}s excluded",
            ),
            ("encrypt: hbtui (end to end)", f"{ours_e2e:8.0f} MiB/s", "KDF included"),
            ("encrypt: gpg AES256, no compression", f"{gpg_bw:8.0f} MiB/s", "whole process"),
            (
                "encrypt: gpg AES256, default (ZIP)",
                f"{gpgz_bw:8.0f} MiB/s",
                "what `box` ran on non-gzip input",
            ),
            ("encrypt: cat to the same disk", f"{cat_bw:8.0f} MiB/s", "the copy limit"),
        ]
        res["encrypt_vs_gpg"] = ours_bw / gpg_bw
        res["encrypt_vs_gpg_default_compression"] = ours_bw / gpgz_bw
        res["encrypt_vs_cat"] = ours_bw / cat_bw
        res["encrypt_end_to_end_vs_gpg"] = ours_e2e / gpg_bw
        res["kdf_seconds"] = min(kdf_times)
        log("encrypt done")

        # --- verify ----------------------------------------------------------------
        v = [ours_verify(ours_arc) for _ in range(args.runs)]
        v_bw = mibs(min(s for _, s in v))
        v_e2e = mibs(min(k + s for k, s in v))

        def gpg_dec() -> None:
            with open(os.devnull, "wb") as dn:
                run_gpg(gnupghome, "--decrypt", str(gpg_arc), stdout=dn)

        gd_bw = mibs(min(timed(gpg_dec, args.runs)))
        rows += [
            ("verify: hbtui (streaming)", f"{v_bw:8.0f} MiB/s", "authenticates every chunk"),
            ("verify: hbtui (end to end)", f"{v_e2e:8.0f} MiB/s", "KDF included"),
            ("verify: gpg -d > /dev/null", f"{gd_bw:8.0f} MiB/s", "whole process"),
        ]
        res["verify_vs_gpg"] = v_bw / gd_bw
        res["verify_end_to_end_vs_gpg"] = v_e2e / gd_bw
        log("verify done")

        # --- save pipeline -----------------------------------------------------------
        tree_bytes = sum(p.stat().st_size for p in data.rglob("*") if p.is_file())
        save_arc = root / "box.hbx"

        def save_new() -> None:
            rm(save_arc)
            pack_dir(data, save_arc, PASS)

        new_times = timed(save_new, 2)
        new_size = save_arc.stat().st_size
        old_arc = root / "box.tar.gz.gpg"

        def save_old() -> None:
            rm(old_arc)
            tar = subprocess.Popen(
                ["tar", "-C", str(data), "-czf", "-", "."], stdout=subprocess.PIPE
            )
            run_gpg(
                gnupghome,
                "--symmetric",
                "--cipher-algo",
                "AES256",
                "-o",
                str(old_arc),
                stdin=tar.stdout,
            )
            assert tar.stdout is not None
            tar.stdout.close()
            if tar.wait() != 0:
                raise SystemExit("tar czf failed")

        old_times = timed(save_old, 1)
        old_size = old_arc.stat().st_size
        rows += [
            (
                "save: tar | zstd -T0 | hbtui",
                f"{mibs(min(new_times), tree_bytes):8.0f} MiB/s",
                f"{min(new_times):.2f}s, {new_size / MiB:.0f} MiB out, KDF included",
            ),
            (
                "save: tar czf | gpg (old box)",
                f"{mibs(min(old_times), tree_bytes):8.0f} MiB/s",
                f"{min(old_times):.2f}s, {old_size / MiB:.0f} MiB out",
            ),
        ]
        res["save_vs_legacy"] = min(old_times) / min(new_times)
        log("save done")

        # --- peak RSS --------------------------------------------------------------------
        t0 = time.perf_counter()
        r = subprocess.run(
            [sys.executable, "-c", RSS_CHILD, str(Path(__file__).resolve().parents[2])],
            capture_output=True,
            text=True,
            check=True,
        )
        maxrss, _after_kdf, before_stream, stream_hwm, reset = r.stdout.split()
        rss_dt = time.perf_counter() - t0
        stream_peak = float(stream_hwm) if reset == "1" else float(maxrss)
        rows += [
            (
                "rss: encryptor, 1 GiB, streaming peak",
                f"{stream_peak:8.1f} MiB",
                f"VmHWM reset after the KDF; {float(before_stream):.1f} MiB at stream start",
            ),
            (
                "rss: encryptor, 1 GiB, incl. KDF",
                f"{float(maxrss):8.1f} MiB",
                f"ru_maxrss; Argon2id m=64 MiB is a one-off; {rss_dt:.1f}s",
            ),
        ]
        res["peak_rss_mib"] = stream_peak
        res["peak_rss_incl_kdf_mib"] = float(maxrss)
        log("rss done")
    finally:
        subprocess.run(
            ["gpgconf", "--homedir", str(gnupghome), "--kill", "gpg-agent"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if args.keep:
            log(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)

    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'figure':>14}  notes")
    for name, fig, note in rows:
        print(f"{name:<{width}}  {fig:>14}  {note}")
    print()
    goals = {"encrypt_vs_gpg": 4, "encrypt_vs_cat": 0.7, "save_vs_legacy": 5, "verify_vs_gpg": 3}
    for k, g in goals.items():
        print(f"{k:<16} {res[k]:6.2f}x  (goal >= {g}x)  {'ok' if res[k] >= g else 'MISSED'}")
    print(
        f"{'peak_rss_mib':<16} {res['peak_rss_mib']:6.1f}   (goal < 64 MiB)  {'ok' if res['peak_rss_mib'] < 64 else 'MISSED'}"
    )
    print(json.dumps({k: round(v, 3) for k, v in res.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
