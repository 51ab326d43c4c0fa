"""Configuration (SPEC §5): TOML validated with errors naming the key; discovery of checkouts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gateway.config import config_from_env, discover, load_config, parse_config
from gateway.errors import ConfigError


def _key(data: dict[str, object]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    return info.value.key


class TestParse:
    def test_full_config(self, tmp_path: Path) -> None:
        """A valid file gives server, defaults, namespaces with adapter settings, and tokens."""
        cfg = tmp_path / "c.toml"
        cfg.write_text(
            f"[server]\nport = 9000\n[defaults]\ntimeout_ms = 2000\n"
            f'[[namespaces]]\nname = "mono"\nbackend = "ripgrep"\nroot = "{tmp_path}"\nweight = 1.5\n'
            f'[[tokens]]\nname = "ci"\nsha256 = "{"a" * 64}"\nnamespaces = ["mono"]\n'
        )
        config = load_config(cfg)
        assert config.server.port == 9000 and config.defaults.timeout_ms == 2000
        ns = config.namespaces[0]
        assert (ns.name, ns.backend, ns.weight) == ("mono", "ripgrep", 1.5)
        assert ns.settings.root == str(tmp_path)  # type: ignore[attr-defined]
        assert config.tokens[0].namespaces == ["mono"]

    @pytest.mark.parametrize(
        ("data", "key"),
        [
            ({"bogus": 1}, "bogus"),
            ({"server": {"port": "x"}}, "server.port"),
            ({"server": {"typo": 1}}, "server.typo"),
            ({"namespaces": [{"backend": "ripgrep", "root": "/"}]}, "namespaces[0].name"),
            ({"namespaces": [{"name": "a", "backend": "nope"}]}, "namespaces[0].backend"),
            ({"namespaces": [{"name": "a", "backend": "ripgrep"}]}, "namespaces[0].root"),
            ({"namespaces": [{"name": "a", "backend": "ripgrep", "root": "/", "colour": 1}]}, "namespaces[0].colour"),
            ({"namespaces": [{"name": "-bad", "backend": "ripgrep", "root": "/"}]}, "namespaces[0].name"),
            ({"namespaces": [{"name": "a", "backend": "ripgrep", "root": "/", "weight": 0}]}, "namespaces[0].weight"),
            (
                {"namespaces": [{"name": "a", "backend": "ripgrep", "root": "/"}] * 2},
                "namespaces[1].name",
            ),
            ({"tokens": [{"name": "t", "sha256": "short"}]}, "tokens[0].sha256"),
        ],
    )
    def test_errors_name_the_key(self, data: dict[str, object], key: str) -> None:
        """Every config error names the offending key."""
        assert _key(data) == key

    def test_invalid_toml(self, tmp_path: Path) -> None:
        """A file that is not TOML is a config error saying so."""
        cfg = tmp_path / "c.toml"
        cfg.write_text("[server\n")
        with pytest.raises(ConfigError, match="invalid TOML"):
            load_config(cfg)


class TestDiscovery:
    def test_every_checkout_is_a_ripgrep_namespace(self, tmp_path: Path) -> None:
        """Each git checkout under the root is a namespace named by its relative path; nested ones are not."""
        for rel in ("a", "team/b", "team/c", "a/inner"):
            (tmp_path / rel).mkdir(parents=True, exist_ok=True)
            subprocess.run(["git", "init", "-q", str(tmp_path / rel)], check=True)
        (tmp_path / "plain").mkdir()
        names = [ns.name for ns in discover(tmp_path)]
        assert names == ["a", "team/b", "team/c"]

    def test_root_that_is_a_checkout(self, tmp_path: Path) -> None:
        """A root that is itself a checkout is one namespace named after it."""
        repo = tmp_path / "proj"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        assert [ns.name for ns in discover(repo)] == ["proj"]

    def test_env_config_wins_over_discovery(self, tmp_path: Path) -> None:
        """FEDSEARCH_CONFIG names the config when --config is absent."""
        cfg = tmp_path / "c.toml"
        cfg.write_text(f'[[namespaces]]\nname = "x"\nbackend = "ripgrep"\nroot = "{tmp_path}"\n')
        config = config_from_env(env={"FEDSEARCH_CONFIG": str(cfg)})
        assert [ns.name for ns in config.namespaces] == ["x"]

    def test_missing_root(self, tmp_path: Path) -> None:
        """A root that is not a directory is an error naming `root`."""
        with pytest.raises(ConfigError) as info:
            discover(tmp_path / "nope")
        assert info.value.key == "root"


class TestTokens:
    def test_the_same_token_twice_is_refused(self) -> None:
        """Two [[tokens]] with one digest would make access ambiguous: refused, naming the key."""
        token = {"name": "a", "sha256": "b" * 64}
        assert _key({"tokens": [token, {**token, "name": "c"}]}) == "tokens[1].sha256"
