"""The declaration index of local namespaces: tree-sitter declarations in SQLite.

- :mod:`~gateway.index.grammars`: the grammar wheels and our per-language queries;
- :mod:`~gateway.index.parse`: a file's declarations (kind, name, span, intent);
- :mod:`~gateway.index.store`: the SQLite database under ``[index] dir``;
- :mod:`~gateway.index.files`: which files to index, and one file read and parsed;
- :mod:`~gateway.index.builder`: building the indexes of local namespaces;
- :mod:`~gateway.index.background`: the background builder process;
- :mod:`~gateway.index.locks`: one lock a root, with a lease (who builds it, alive or stuck);
- :mod:`~gateway.index.lifetime`: every process a build starts ends with its parent;
- :mod:`~gateway.index.roots`: each indexed checkout's last use, and which a running builder holds;
- :mod:`~gateway.index.prune`: the folder kept within ``keep_days`` and ``max_bytes``;
- :mod:`~gateway.index.hits`: matched lines grouped into declaration hits;
- :mod:`~gateway.index.resolve`: what a search asks of it (definitions, a page's hits);
- :mod:`~gateway.index.setup`: the indexes of a config (:func:`~gateway.index.setup.index_for`);
- :mod:`~gateway.index.content`: the content index, which narrows what rg reads.

Nothing is imported here: a one-shot search imports only the modules it reads.
"""
