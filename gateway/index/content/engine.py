"""The engine under the content index: one tantivy index per checkout (the only module importing tantivy).

Each file is one document: ``path`` (a raw, fast field: a search reads the matching
files' paths straight from the column, no stored document is fetched) and ``g``, its
distinct grams as words (:func:`gateway.index.content.grams.tokens`), indexed with document ids
only (no frequencies, no positions: a search asks which files hold every gram of a plan,
not where). Two more words mark what the grams cannot say: :data:`ALWAYS` on a file every
search reads (it has no grams), :data:`FOLDER` on a file searched through its folder.

Why tantivy (bench/content_engines.py has the figures of one run against SQLite FTS5
and pyroaring posting lists): fed a file's distinct grams, it builds several times faster
than FTS5's trigram tokenizer, its segments are a third to half the size (bit-packed
posting blocks, an FST term dictionary), it answers the plans in well under a millisecond
a checkout, and it updates in place (delete by path, add, commit) with readers in other
processes reopening at their next search. Readers use the manual reload policy: a search
reopens an index only when its ``meta.json`` was replaced, or one of its files changed, and only
once every file it names is verified (:class:`Reader`, :mod:`~gateway.index.content.verify`): tantivy
checks that a file has its footer, never its checksum, and would read a changed byte as other postings.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from typing import Any

import tantivy

from gateway.index.content.grams import token
from gateway.index.content.layout import ALWAYS, ENGINE, FOLDER, encode_path, path_hash
from gateway.index.content.plan import And, Gram, Need
from gateway.index.content.verify import META, EngineDamaged, Signature, Verifier, file_signature

__all__ = ["OPEN_ATTEMPTS", "SCHEMA", "Reader", "Writer"]

#: Writer memory (bytes) and threads: tantivy splits the heap between its threads (>= 15 MB each).
WRITER_HEAP = 64_000_000
WRITER_THREADS = 1
#: Times a reader tries to open an engine a builder keeps committing to before it scans this once.
OPEN_ATTEMPTS = 3


def _schema() -> Any:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("g", stored=False, tokenizer_name="whitespace", index_option="basic")
    builder.add_text_field("path", stored=False, tokenizer_name="raw", index_option="basic")
    builder.add_unsigned_field("h", stored=False, indexed=False, fast=True)
    return builder.build()


SCHEMA = _schema()


def _query(need: Need) -> Any:
    if isinstance(need, Gram):
        return tantivy.Query.term_query(SCHEMA, "g", token(need.code))
    occur = tantivy.Occur.Must if isinstance(need, And) else tantivy.Occur.Should
    parts = need.parts if isinstance(need, And) else need.options
    return tantivy.Query.boolean_query([(occur, _query(part)) for part in parts])


def _count(searcher: Any, query: Any) -> int:
    count: int = searcher.search(query, limit=1, count=True).count
    return count


def _word(word: str) -> Any:
    return tantivy.Query.term_query(SCHEMA, "g", word)


class Reader:
    """One checkout's engine as a search reads it: verified, then opened; opened again when a builder
    committed since (its meta.json replaced), or when one of its files changed. Each search looks at every
    file of the engine open (a ``stat`` each, 0.3 ms for 60 files): tantivy never writes a segment file
    twice, so a file that changed is damage, and the file is never read again (it is mapped: a file cut
    short would fault the process at its next read)."""

    def __init__(self, folder: str) -> None:
        self.path = os.path.join(folder, ENGINE)
        self._meta = os.path.join(self.path, META)
        self._verifier = Verifier(folder)
        self._seen: Signature | None = None
        self._searcher: Any = None
        self.files = 0
        #: The engine's commit (tantivy's opstamp): the manifest says which one it describes.
        self.opstamp = -1
        #: The hashes of the files searched through their folder (few: binary-looking and UTF-16 files).
        self.folder_files: frozenset[int] = frozenset()
        #: How many files every search reads (too large, or through their folder: :data:`ALWAYS`).
        self.always = 0

    def refresh(self, quiet: bool = False) -> bool:
        """Open the engine again if a builder committed since, or a file of it changed, once every file it
        names is verified (:mod:`~gateway.index.content.verify`); whether there is one. Raises ValueError
        (:class:`~.verify.EngineDamaged`, or tantivy's) for a damaged engine: the caller scans the checkout
        and a builder rebuilds it. A commit under way while it looks is no damage: it looks again.
        ``quiet``: the caller knows nothing in the engine's folder changed since it last looked (a server's
        watcher said so): the engine open is kept without a look at its files."""
        if quiet and self._searcher is not None:
            return True
        for _ in range(OPEN_ATTEMPTS):
            seen = file_signature(self._meta)
            if seen is None:
                self._drop()
                return False
            if seen == self._seen and self._searcher is not None and self._verifier.unchanged():
                return True
            self._drop()  # a file it has open may have changed: never read it again (nor fault on a cut one)
            try:
                self._open(seen)
            except (OSError, ValueError):
                self._drop()
                if file_signature(self._meta) == seen:
                    raise  # the engine it verified is damaged, not replaced meanwhile
                continue
            if file_signature(self._meta) == seen:
                return True
        self._drop()
        return False  # a builder commits faster than this reads: scanned this once

    def _open(self, seen: Signature) -> None:
        meta = self._verifier.verify()
        index = tantivy.Index.open(self.path)
        if index.schema != SCHEMA:
            raise EngineDamaged(f"{META}: another schema")
        index.config_reader(reload_policy="Manual")
        searcher = index.searcher()
        if searcher.num_docs != meta.docs and file_signature(self._meta) == seen:
            raise EngineDamaged(f"{META}: {meta.docs} documents, tantivy reads {searcher.num_docs}")
        self.files, self.opstamp = searcher.num_docs, meta.opstamp
        self.folder_files = frozenset(self._hashes(searcher, _word(FOLDER)))
        self.always = _count(searcher, _word(ALWAYS)) if self.files else 0
        self._searcher, self._seen = searcher, seen

    @property
    def mapped(self) -> int:
        """The files of the engine open (tantivy maps each: 0 when none is open)."""
        files = self._verifier.files
        return len(files) if self._searcher is not None and files is not None else 0

    def close(self) -> None:
        """Let go of the engine open (its files unmapped once tantivy's searcher is freed); the next
        :meth:`refresh` opens it again."""
        self._drop()

    def _drop(self) -> None:
        self._searcher, self._seen = None, None
        self.files, self.opstamp, self.folder_files, self.always = 0, -1, frozenset(), 0

    def _hashes(self, searcher: Any, query: Any) -> list[int]:
        if not self.files:
            return []
        addresses = [address for _, address in searcher.search(query, limit=self.files, count=False).hits]
        values: list[int] = searcher.fast_field_values("h", addresses) if addresses else []
        return values

    def candidates(self, need: Need, most: int) -> list[int] | None:
        """The path hashes of the files holding every gram ``need`` asks for, and of those every search
        reads; None when more than ``most`` hold the grams. One search answers a selective query: the count
        and the first FEW hits together; only between FEW and ``most`` hits is the list asked for again.
        (Counting first, then listing, cost a selective query two searches: 1,248 checkouts asked 2.5x as long.)"""
        query = _with_always(need)
        found = self._searcher.search(query, limit=FEW, count=True)
        count, bound = found.count, most + self.always
        if count > bound:
            return None  # more than ``most`` hold the grams, whatever the files every search reads are
        hits = found.hits if count <= FEW else self._searcher.search(query, limit=count, count=False).hits
        addresses = [address for _, address in hits]
        values: list[int] = self._searcher.fast_field_values("h", addresses) if addresses else []
        return values


#: The hits a candidates search lists with its count (enough for a selective query's files in one checkout).
FEW = 64

_last: tuple[Need, Any] | None = None  # the last plan asked, and its query (one query a search, not a checkout)


def _with_always(need: Need) -> Any:
    """``need`` or the files every search reads, as a tantivy query: made once for a plan asked of many
    checkouts in turn (a tantivy query belongs to the schema, not to an engine)."""
    global _last
    last = _last
    if last is not None and last[0] is need:
        return last[1]
    query = tantivy.Query.boolean_query([(tantivy.Occur.Should, _query(need)), (tantivy.Occur.Should, _word(ALWAYS))])
    _last = (need, query)
    return query


class Writer:
    """One checkout's engine as the builder writes it (created when missing)."""

    def __init__(self, folder: str) -> None:
        path = os.path.join(folder, ENGINE)
        os.makedirs(path, exist_ok=True)
        self._index = tantivy.Index(SCHEMA, path=path, reuse=True)
        self._writer: Any = self._index.writer(heap_size=WRITER_HEAP, num_threads=WRITER_THREADS)
        self.path = path
        self._dirty = False  # something written since the last commit

    def remove(self, paths: Iterable[str]) -> None:
        for path in paths:
            self._dirty = True
            self._writer.delete_documents_by_term("path", encode_path(path))

    def put(self, path: str, words: str) -> None:
        """Index one file (after :meth:`remove` of any older version of it)."""
        doc = tantivy.Document()
        doc.add_text("path", encode_path(path))
        doc.add_unsigned("h", path_hash(path))
        doc.add_text("g", words)
        self._dirty = True
        self._writer.add_document(doc)

    def commit(self) -> int:
        """Commit what was written; the commit's opstamp (meta.json's, which merges keep)."""
        opstamp: int = self._writer.commit()
        self._dirty = False
        return opstamp

    def close(self) -> None:
        """Wait for merges; nothing uncommitted is kept."""
        writer, self._writer = self._writer, None
        if writer is not None:
            if self._dirty:  # a rollback makes a new writer (threads, memory): only where there is something to drop
                writer.rollback()
            writer.wait_merging_threads()

    def bytes(self) -> int:
        """The engine's size on disk."""
        total = 0
        with os.scandir(self.path) as entries:
            for entry in entries:
                with contextlib.suppress(FileNotFoundError):  # a file tantivy writes aside, renamed meanwhile
                    if entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
        return total
