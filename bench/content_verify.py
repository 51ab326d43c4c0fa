"""content_verify: what verifying a content index's engine costs (issue 48), cold, warm, and with the record.

    .venv/bin/python bench/content_verify.py [--mb 100] [--rounds 5] [--dir DIR]

Builds one engine of about ``--mb`` megabytes with the real writer
(:class:`gateway.index.content.engine.Writer`), fed synthetic documents: each a few
thousand random four-letter words of the grams' alphabet (a fixed seed), so its posting
lists and term dictionary are as dense as a real checkout's. Then it times
:meth:`gateway.index.content.verify.Verifier.verify` (every file meta.json names checked)
as each kind of process meets it, the median of ``--rounds``:

- **cold disk**: a new process-level verifier, every engine file dropped from the page cache
  first (``posix_fadvise(DONTNEED)``; a file another process has mapped may stay);
- **cold process**: a new verifier, files in the page cache (a one-shot CLI after a build);
- **with the record**: a new verifier, the builder's ``verified.msgpack`` beside the engine
  (what a one-shot CLI pays once a builder has recorded it: a ``stat`` a file);
- **known**: the same verifier again (a server's reader, a builder's next pass);
- **unchanged**: :meth:`~gateway.index.content.verify.Verifier.unchanged` (a ``stat`` a file);

and a reader's first open (:meth:`gateway.index.content.engine.Reader.refresh`, verification
included) with and without the record. Figures only, no assertion.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.index.content.engine import Reader, Writer
from gateway.index.content.verify import RECORD, Verifier

#: The grams' alphabet (gateway.index.content.grams.tokens: 4 letters of A-Za-z0-9+/).
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
#: Words a document, and distinct words in all (a real checkout's grams: a few thousand a file, ~1M in all).
WORDS = 3000
VOCABULARY = 1 << 20
#: Documents written between two checks of the engine's size.
STEP = 2000


def build(folder: str, mb: int) -> tuple[int, int]:
    """An engine of about ``mb`` MB in ``folder``: (documents, bytes)."""
    rng = random.Random(48)
    vocabulary = ["".join(rng.choices(ALPHABET, k=4)) for _ in range(VOCABULARY)]
    writer = Writer(folder)
    docs = 0
    while writer.bytes() < mb * 1_000_000:
        for _ in range(STEP):
            writer.put(f"file{docs}.py", " ".join(rng.sample(vocabulary, WORDS)))
            docs += 1
        writer.commit()
    writer.close()
    return docs, writer.bytes()


def evict(engine: str) -> None:
    """The engine's files dropped from the page cache (as far as the kernel lets an unprivileged process)."""
    for name in os.listdir(engine):
        fd = os.open(os.path.join(engine, name), os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def timed(rounds: int, setup: Callable[[], object], run: Callable[[object], object]) -> float:
    """The median seconds of ``run(setup())`` (setup untimed)."""
    seconds = []
    for _ in range(rounds):
        made = setup()
        started = time.perf_counter()
        run(made)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mb", type=int, default=100, help="the engine's size (MB)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", help="where to build it (default: a temporary folder, removed)")
    args = parser.parse_args()
    folder = args.dir or tempfile.mkdtemp(prefix="fedsearch-content-verify-")
    try:
        started = time.perf_counter()
        docs, size = build(folder, args.mb)
        engine = os.path.join(folder, "engine")
        files = len(Verifier(folder).verify().files)
        print(
            f"content_verify: engine of {size / 1e6:.1f} MB, {docs:,} documents, {files} files "
            f"(built in {time.perf_counter() - started:.1f} s)",
            flush=True,
        )

        def fresh() -> Verifier:
            with_record = os.path.join(folder, RECORD)
            if os.path.exists(with_record):
                os.unlink(with_record)
            return Verifier(folder)

        def cold() -> Verifier:
            verifier = fresh()
            evict(engine)
            return verifier

        def recorded() -> Verifier:
            verifier = fresh()
            verifier.verify()
            verifier.record()
            return Verifier(folder)

        def known() -> Verifier:
            verifier = fresh()
            verifier.verify()
            return verifier

        def verify(verifier: object) -> object:
            assert isinstance(verifier, Verifier)
            return verifier.verify()

        def unchanged(verifier: object) -> object:
            assert isinstance(verifier, Verifier)
            return verifier.unchanged()

        def reader_without() -> Reader:
            fresh()
            return Reader(folder)

        def reader_with() -> Reader:
            recorded()
            return Reader(folder)

        def refresh(reader: object) -> object:
            assert isinstance(reader, Reader)
            return reader.refresh()

        rows = [
            ("cold disk (page cache dropped)", timed(args.rounds, cold, verify)),
            ("cold process (page cache warm)", timed(args.rounds, fresh, verify)),
            ("with the builder's record", timed(args.rounds, recorded, verify)),
            ("known to this process", timed(args.rounds, known, verify)),
            ("unchanged() (a stat a file)", timed(args.rounds, known, unchanged)),
            ("reader's first open, no record", timed(args.rounds, reader_without, refresh)),
            ("reader's first open, with record", timed(args.rounds, reader_with, refresh)),
        ]
        for label, seconds in rows:
            rate = f"  ({size / seconds / 1e9:.2f} GB/s)" if seconds > 0.01 else ""
            print(f"  {label:<36} {seconds * 1e3:9.2f} ms{rate}")
    finally:
        if not args.dir:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
