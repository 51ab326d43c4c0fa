"""Languages a request may filter on, each a set of file-name globs.

The names follow the common ones (GitHub linguist, ripgrep's types) in lower case;
aliases map onto them. A language filter is a file-extension filter: every
backend that cannot filter by language itself is filtered locally with these.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["ALIASES", "LANGUAGES", "globs_for", "normalise"]

LANGUAGES: dict[str, tuple[str, ...]] = {
    "c": ("*.c", "*.h"),
    "cpp": ("*.cc", "*.cpp", "*.cxx", "*.hh", "*.hpp", "*.hxx", "*.h"),
    "csharp": ("*.cs",),
    "css": ("*.css", "*.scss", "*.sass", "*.less"),
    "dart": ("*.dart",),
    "elixir": ("*.ex", "*.exs"),
    "erlang": ("*.erl", "*.hrl"),
    "go": ("*.go",),
    "haskell": ("*.hs", "*.lhs"),
    "html": ("*.html", "*.htm"),
    "java": ("*.java",),
    "javascript": ("*.js", "*.jsx", "*.mjs", "*.cjs"),
    "json": ("*.json",),
    "kotlin": ("*.kt", "*.kts"),
    "lua": ("*.lua",),
    "markdown": ("*.md", "*.markdown"),
    "ocaml": ("*.ml", "*.mli"),
    "perl": ("*.pl", "*.pm"),
    "php": ("*.php",),
    "protobuf": ("*.proto",),
    "python": ("*.py", "*.pyi"),
    "r": ("*.r", "*.R"),
    "rst": ("*.rst",),
    "ruby": ("*.rb",),
    "rust": ("*.rs",),
    "scala": ("*.scala", "*.sc"),
    "shell": ("*.sh", "*.bash", "*.zsh"),
    "sql": ("*.sql",),
    "swift": ("*.swift",),
    "terraform": ("*.tf", "*.tfvars"),
    "toml": ("*.toml",),
    "typescript": ("*.ts", "*.tsx", "*.mts", "*.cts"),
    "xml": ("*.xml",),
    "yaml": ("*.yaml", "*.yml"),
    "zig": ("*.zig",),
}

#: Other names a language is known by (rg's type names among them) -> its name in LANGUAGES.
ALIASES = {
    "c++": "cpp",
    "c#": "csharp",
    "cs": "csharp",
    "golang": "go",
    "js": "javascript",
    "md": "markdown",
    "py": "python",
    "rb": "ruby",
    "rs": "rust",
    "sh": "shell",
    "bash": "shell",
    "ts": "typescript",
    "yml": "yaml",
}


def normalise(name: str) -> str | None:
    """The canonical name of a language, or ``None`` if unknown."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    return key if key in LANGUAGES else None


def globs_for(languages: Iterable[str]) -> tuple[str, ...]:
    """The file-name globs of canonical language names, deduplicated, in order."""
    seen: dict[str, None] = {}
    for lang in languages:
        for glob in LANGUAGES[lang]:
            seen.setdefault(glob, None)
    return tuple(seen)
