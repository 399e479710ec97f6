from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from semhash_llm.cli import build_parser, config_from_args
from semhash_llm.config import ConfigError, MinHashConfig, PipelineConfig, SelectConfig


def test_error_template_names_parameter_range_and_value() -> None:
    with pytest.raises(ConfigError, match=r"The 'threshold' parameter of MinHashConfig must be a float in "
                                          r"\(0.0, 1.0\]. Got 1.3 instead."):
        MinHashConfig(threshold=1.3)
    with pytest.raises(ConfigError, match="must be at most num_perm"):
        MinHashConfig(num_perm=64, num_bands=10, rows_per_band=10)
    with pytest.raises(ConfigError, match="'rows_per_band' parameter of MinHashConfig must be set together with 'num_bands'"):
        MinHashConfig(num_bands=10)
    with pytest.raises(ConfigError, match="priority_field"):
        SelectConfig(keep="priority")
    with pytest.raises(ConfigError, match=r"'cover_containment' parameter of SelectConfig must be a float in \(0.0, 1.0\]"):
        SelectConfig(cover_containment=0.0)
    with pytest.raises(ConfigError, match="an int"):
        MinHashConfig(num_perm=True)  # type: ignore[arg-type]


def test_toml_python_and_flags_build_the_same_config(tmp_path: Path) -> None:
    toml = tmp_path / "c.toml"
    toml.write_text("[minhash]\nthreshold = 0.7\nnum_perm = 64\n\n[select]\nkeep = 'longest'\n")
    from_toml = PipelineConfig.from_toml(toml)
    from_py = PipelineConfig(minhash=MinHashConfig(threshold=0.7, num_perm=64), select=SelectConfig(keep="longest"))
    args = build_parser().parse_args(["dedup", "x.jsonl", "-o", "out", "--threshold", "0.7", "--num-perm", "64",
                                      "--keep", "longest"])
    from_flags = config_from_args(args)
    assert from_toml == from_py == from_flags
    assert from_toml.fingerprint() == from_flags.fingerprint()
    # Flags override the file.
    args = build_parser().parse_args(["dedup", "x", "-o", "o", "--config", str(toml), "--threshold", "0.9"])
    cfg = config_from_args(args)
    assert cfg.minhash.threshold == 0.9 and cfg.minhash.num_perm == 64


def test_unknown_keys_and_sections_are_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"Unknown key\(s\) 'treshold' in section \[minhash\]"):
        PipelineConfig.from_dict({"minhash": {"treshold": 0.5}})
    with pytest.raises(ConfigError, match=r"Unknown section \[minhsh\]"):
        PipelineConfig.from_dict({"minhsh": {}})
    bad = tmp_path / "bad.toml"
    bad.write_text("[minhash\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        PipelineConfig.from_toml(bad)
    with pytest.raises(ConfigError, match="not found"):
        PipelineConfig.from_toml(tmp_path / "missing.toml")


def test_fingerprint_is_stable_and_ignores_output_format() -> None:
    a = PipelineConfig()
    b = PipelineConfig.from_dict({"output": {"format": "jsonl"}})
    c = PipelineConfig.from_dict({"minhash": {"threshold": 0.75}})
    assert a.fingerprint() == b.fingerprint() == PipelineConfig().fingerprint()
    assert a.fingerprint() != c.fingerprint()
    assert len(a.fingerprint()) == 16


def test_flag_help_states_the_config_defaults() -> None:
    """Every flag bound to a config field ends its help with that field's real default."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    dedup = sub.choices["dedup"]
    defaults = PipelineConfig()
    checked = 0
    for action in dedup._actions:
        if "." not in action.dest:
            continue
        section, name = action.dest.split(".", 1)
        value = getattr(getattr(defaults, section), name)
        assert action.help is not None and "default" in action.help, action.dest
        if value is not None and not isinstance(value, bool):
            assert f"(default: {value})" in action.help, (action.dest, action.help)
        checked += 1
    assert checked >= 20
    radius = next(a for a in dedup._actions if a.dest == "sph.radius")
    assert f"(default: {defaults.sph.radius})" in (radius.help or "")


def test_passage_flags_set_the_passage_section() -> None:
    args = build_parser().parse_args(["dedup", "x", "-o", "o", "--fragment-min-docs", "7", "--fragment-keep", "longest",
                                      "--fragment-min-words", "12", "--max-cut-share", "0.3", "--containment", "0.9",
                                      "--passage-memory-mb", "64"])
    p = config_from_args(args).passages
    assert (p.fragment_min_docs, p.fragment_keep, p.fragment_min_words, p.max_cut_share, p.containment,
            p.memory_budget_mb) == (7, "longest", 12, 0.3, 0.9, 64)
    off = config_from_args(build_parser().parse_args(["dedup", "x", "-o", "o", "--no-passages"]))
    assert off.passages.enabled is False and PipelineConfig().passages.enabled is True
    with pytest.raises(ConfigError, match="fragment_keep"):
        PipelineConfig.from_dict({"passages": {"fragment_keep": "last"}})


def test_a_stage_name_names_its_section_too() -> None:
    """``[lsh]`` is ``[minhash]`` and ``[mgfn]`` is ``[verifier]``; giving both is refused."""
    cfg = PipelineConfig.from_dict({"lsh": {"threshold": 0.7}, "mgfn": {"short_tokens": 40}})
    assert cfg.minhash.threshold == 0.7 and cfg.verifier.short_tokens == 40
    assert cfg == PipelineConfig.from_dict({"minhash": {"threshold": 0.7}, "verifier": {"short_tokens": 40}})
    with pytest.raises(ConfigError, match=r"Sections \[lsh\] and \[minhash\] .* keep one of them"):
        PipelineConfig.from_dict({"lsh": {"threshold": 0.7}, "minhash": {"threshold": 0.8}})
    with pytest.raises(ConfigError, match=r"lsh for minhash, mgfn for verifier"):
        PipelineConfig.from_dict({"lhs": {"threshold": 0.7}})
