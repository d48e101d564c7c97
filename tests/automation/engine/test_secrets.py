import stat
from pathlib import Path

import pytest

from automation.engine.errors import SecretsConfigError
from automation.engine.secrets import state_settings, where_state_lives


def test_defaults_file_backend_and_generated_passphrase(tmp_path: Path) -> None:
    s = state_settings(tmp_path, {})
    assert s.backend_url == f"file://{tmp_path / 'state'}?metadata=skip"
    assert (tmp_path / "state").is_dir()
    assert s.secrets_provider == "passphrase"
    path = Path(s.env["PULUMI_CONFIG_PASSPHRASE_FILE"])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(path.read_text()) >= 40
    assert "PULUMI_CONFIG_PASSPHRASE" not in s.env  # handed over by path, not by value
    again = state_settings(tmp_path, {})
    assert Path(again.env["PULUMI_CONFIG_PASSPHRASE_FILE"]).read_text() == path.read_text()


def test_passphrase_from_environment_wins(tmp_path: Path) -> None:
    s = state_settings(tmp_path, {"PULUMI_CONFIG_PASSPHRASE": "pw"})
    assert s.env == {"PULUMI_CONFIG_PASSPHRASE": "pw"}
    assert not (tmp_path / "passphrase").exists()
    f = state_settings(tmp_path, {"PULUMI_CONFIG_PASSPHRASE_FILE": "/run/secrets/pw"})
    assert f.env == {"PULUMI_CONFIG_PASSPHRASE_FILE": "/run/secrets/pw"}


def test_backend_url_override(tmp_path: Path) -> None:
    env = {"PULUMI_BACKEND_URL": "s3://team-state", "PULUMI_CONFIG_PASSPHRASE": "x"}
    s = state_settings(tmp_path, env)
    assert s.backend_url == "s3://team-state" and not (tmp_path / "state").exists()


def test_kms_provider(tmp_path: Path) -> None:
    url = "awskms://alias/anycloud?region=us-east-1"
    s = state_settings(tmp_path, {"ANYCLOUD_SECRETS_PROVIDER": url})
    assert (s.secrets_provider, s.env) == (url, {})
    with pytest.raises(SecretsConfigError, match="KMS URL"):
        state_settings(tmp_path, {"ANYCLOUD_SECRETS_PROVIDER": "rot13://"})


def test_world_readable_passphrase_refused(tmp_path: Path) -> None:
    state_settings(tmp_path, {})
    (tmp_path / "passphrase").chmod(0o644)
    with pytest.raises(SecretsConfigError, match="chmod 600"):
        state_settings(tmp_path, {})


@pytest.mark.parametrize("var", ["PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE"])
@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_passphrase_is_refused(tmp_path: Path, var: str, value: str) -> None:
    with pytest.raises(SecretsConfigError) as err:
        state_settings(tmp_path / "home", {var: value})
    assert err.value.field == var and "must not be empty" in (err.value.rule or "")
    assert not (tmp_path / "home" / "passphrase").exists()  # nothing generated instead


def test_an_empty_passphrase_file_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "pw"
    empty.write_text("\n")
    with pytest.raises(SecretsConfigError) as err:
        state_settings(tmp_path, {"PULUMI_CONFIG_PASSPHRASE_FILE": str(empty)})
    assert err.value.value == str(empty) and "empty file" in err.value.message
    empty.write_text("correct horse battery staple\n")
    ok = state_settings(tmp_path, {"PULUMI_CONFIG_PASSPHRASE_FILE": str(empty)})
    assert ok.env == {"PULUMI_CONFIG_PASSPHRASE_FILE": str(empty)}


def test_where_the_state_lives_is_said_without_touching_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    line = where_state_lives(home, {})
    assert f"file://{home / 'state'}" in line and "outlive" in line
    assert "PersistentVolume" not in line
    in_pod = where_state_lives(home, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert "PersistentVolume" in in_pod and "emptyDir" in in_pod
    remote = where_state_lives(home, {"PULUMI_BACKEND_URL": "s3://team-state?region=x"})
    assert remote == "Pulumi state: s3://team-state (PULUMI_BACKEND_URL)"
    assert not home.exists()  # nothing made, nothing generated
