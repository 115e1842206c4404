from pathlib import Path

import pytest

from agent.config import DEFAULT_CONFIG, ConfigError, load_config

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted([*ROOT.glob("launch/*.toml"), *ROOT.glob("jetson/*.toml")])


def test_embedded_default_loads():
    cfg = load_config()
    assert cfg.source == DEFAULT_CONFIG
    assert cfg.llm.model == "packaged:smollm2-135m"
    assert cfg.asr.model == "packaged:whisper-tiny.en"
    assert cfg.tts.voice == "packaged:piper-joe-medium"
    assert cfg.robot.driver == "sim"
    assert {j.name for j in cfg.robot.joints} >= {"head_yaw", "head_pitch", "left_arm", "right_arm"}


def test_missing_file_names_it(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.toml: config file not found"):
        load_config(tmp_path / "nope.toml")


def test_not_toml_names_file(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("[llm\nmodel = 3\n")
    with pytest.raises(ConfigError, match=r"bad\.toml: not valid TOML"):
        load_config(p)


def test_bad_value_names_key_and_expectation(tmp_path):
    p = tmp_path / "robot.toml"
    p.write_text('[llm]\nn_ctx = "big"\ntemperature = 9\n')
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    assert "robot.toml" in msg and "llm.n_ctx" in msg and "valid integer" in msg and "'big'" in msg
    assert "llm.temperature" in msg and "less than or equal to 2" in msg


def test_unknown_key_is_reported(tmp_path):
    p = tmp_path / "robot.toml"
    p.write_text("[llm]\nn_gpu_layer = 3\n")
    with pytest.raises(ConfigError, match=r"llm\.n_gpu_layer: unknown key"):
        load_config(p)


def test_joint_limits_checked(tmp_path):
    p = tmp_path / "robot.toml"
    p.write_text('[[robot.joints]]\nname = "x"\nmin_deg = 10\nmax_deg = -10\n')
    with pytest.raises(ConfigError, match=r"robot\.joints\.0.*min_deg"):
        load_config(p)


def test_relative_skill_folders_resolve_against_file(tmp_path):
    p = tmp_path / "robot.toml"
    p.write_text('[skills]\nfolders = ["my_skills"]\n')
    cfg = load_config(p)
    assert cfg.skills.folders == [tmp_path.resolve() / "my_skills"]
    assert Path(cfg.skills.folders[0]).is_absolute()


@pytest.mark.parametrize("path", SHIPPED, ids=[p.relative_to(ROOT).as_posix() for p in SHIPPED])
def test_every_shipped_config_loads(path):
    cfg = load_config(path)
    assert cfg.source == path and cfg.robot.joints
