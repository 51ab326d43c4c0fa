"""The content index: which files of a local checkout can hold a match, so rg reads only those.

- :mod:`~gateway.index.content.grams`: a file's trigrams, ASCII-folded, as the engine keeps them;
- :mod:`~gateway.index.content.plan`: the grams every file holding a match must contain (literal, RE2);
- :mod:`~gateway.index.content.records`: one file read: its kind for a search (as rg treats it) and grams;
- :mod:`~gateway.index.content.paths`, :mod:`~gateway.index.content.layout`: the folders and files on disk;
- :mod:`~gateway.index.content.engine`: tantivy, one index per checkout (the only module importing it);
- :mod:`~gateway.index.content.build`: a whole pass, or the folders of changed files, brought up to date;
- :mod:`~gateway.index.content.fresh`: what changed since a file or folder was indexed;
- :mod:`~gateway.index.content.watch`: inotify, so a search sees every change made before it;
- :mod:`~gateway.index.content.follow`: the builder re-reading what its watcher saw change;
- :mod:`~gateway.index.content.narrow`: what a search asks (:class:`~gateway.narrowing.Narrower`).

docs/content-index.md tells how they fit, and why this engine.
"""
