"""Secrets never reach the training data: each kind, planted in all five languages and in config
files, is scrubbed from every file the data stage writes; ordinary code is left alone."""

import json
from pathlib import Path

import pyarrow as pa
import pytest

from ferrylm.data.clean import scrub_secrets

# One value per kind; each must vanish. Built from pieces so no scanner mistakes this file for a leak.
AWS_ID = "AKIA" + "Q3EXAMPLEZ7Y2W4V"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYzq9TEXAMPL"  # 40 characters, as AWS issues them
TOKEN = "tk_9fQ2xV7pLm3Rz8Wc" + "4Yb6Nd1HjK5"
PASSWORD = "Tr0ub4dor&3-" + "hunter"
DB_PASSWORD = "pg-S3cr3t" + "-pass77"
GITHUB = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
SECRETS = [AWS_ID, AWS_SECRET, TOKEN, PASSWORD, DB_PASSWORD, GITHUB]

LANGS = {
    "py": (
        "python",
        '''def connect_{i}(host):
    """Open a client to the service."""
    aws_key = "{AWS_ID}"
    aws_secret_access_key = "{AWS_SECRET}"
    api_token = "{TOKEN}"
    password: str = "{PASSWORD}"
    url = "postgres://app:{DB_PASSWORD}@" + host
    return Client(aws_key, api_token, password, url, "{GITHUB}")
''',
    ),
    "java": (
        "java",
        """public class Conn{i} {{
    /** Open a client to the service. */
    public static Client connect(String host) {{
        String awsKey = "{AWS_ID}";
        String awsSecretKey = "{AWS_SECRET}";
        final String API_TOKEN = "{TOKEN}";
        String password = "{PASSWORD}";
        String url = "jdbc:postgresql://" + host + "/db?user=app&password={DB_PASSWORD}";
        return new Client(awsKey, awsSecretKey, API_TOKEN, password, url, "{GITHUB}");
    }}
}}
""",
    ),
    "go": (
        "go",
        """package conn

// Connect{i} opens a client to the service.
func Connect{i}(host string) *Client {{
	awsKey := "{AWS_ID}"
	awsSecret := "{AWS_SECRET}"
	var apiToken string = "{TOKEN}"
	password := `{PASSWORD}`
	url := "mysql://app:{DB_PASSWORD}@" + host
	return NewClient(awsKey, awsSecret, apiToken, password, url, "{GITHUB}")
}}
""",
    ),
    "rs": (
        "rust",
        """/// Open a client to the service.
pub fn connect_{i}(host: &str) -> Client {{
    let aws_key = "{AWS_ID}";
    const AWS_SECRET_KEY: &str = "{AWS_SECRET}";
    let api_token: &str = "{TOKEN}";
    let password = String::from("{PASSWORD}");
    let url = format!("redis://app:{DB_PASSWORD}@{{}}", host);
    Client::new(aws_key, AWS_SECRET_KEY, api_token, password, url, "{GITHUB}")
}}
""",
    ),
    "cpp": (
        "cpp",
        """#define API_TOKEN "{TOKEN}"
// Open a client to the service.
Client connect_{i}(const std::string& host) {{
    const char* aws_key = "{AWS_ID}";
    std::string aws_secret_access_key = "{AWS_SECRET}";
    std::string password{{"{PASSWORD}"}};
    std::string url = "amqp://app:{DB_PASSWORD}@" + host;
    return Client(aws_key, aws_secret_access_key, API_TOKEN, password, url, "{GITHUB}");
}}
""",
    ),
}
CONFIGS = {
    "prod.env": "AWS_ACCESS_KEY_ID={AWS_ID}\nAWS_SECRET_ACCESS_KEY={AWS_SECRET}\nAPI_TOKEN={TOKEN}\nDB_PASSWORD={PASSWORD}\n"
    "DATABASE_URL=postgres://app:{DB_PASSWORD}@db:5432/app\nGITHUB_TOKEN={GITHUB}\n",
    "settings.yaml": 'aws:\n  access_key_id: {AWS_ID}\n  secret_access_key: "{AWS_SECRET}"\napi_token: {TOKEN}\n'
    "password: {PASSWORD}\ndatabase: postgres://app:{DB_PASSWORD}@db/app\ngithub: {GITHUB}\n",
    "app.properties": "aws.accessKeyId={AWS_ID}\naws.secretKey={AWS_SECRET}\napi.token={TOKEN}\n"
    "db.password={PASSWORD}\ndb.url=jdbc:mysql://db/app?user=app&password={DB_PASSWORD}\ngh={GITHUB}\n",
}


def _fill(template: str, i: int = 0) -> str:
    return template.format(
        i=i,
        AWS_ID=AWS_ID,
        AWS_SECRET=AWS_SECRET,
        TOKEN=TOKEN,
        PASSWORD=PASSWORD,
        DB_PASSWORD=DB_PASSWORD,
        GITHUB=GITHUB,
    )


@pytest.mark.parametrize("ext", LANGS)
def test_every_kind_is_scrubbed_in_each_language(ext):
    out, found = scrub_secrets(_fill(LANGS[ext][1]))
    assert [s for s in SECRETS if s in out] == []
    assert {"aws_access_key", "github_token", "connection_password"} <= set(found), found
    assert found["aws_secret_key"] + found["assigned_secret"] >= 3, found


@pytest.mark.parametrize("name", CONFIGS)
def test_every_kind_is_scrubbed_in_config_files(name):
    out, found = scrub_secrets(_fill(CONFIGS[name]), config_file=True)
    assert [s for s in SECRETS if s in out] == [], out


@pytest.mark.parametrize(
    "line",
    [
        'token_type = "bearer"',
        'TOKEN_URL = "https://oauth2.example.com/token"',
        'PASSWORD_ENV = "DB_PASSWORD"',
        'password = os.environ["DB_PASSWORD"]',
        "password = get_password()",
        'secret_template = "{user}:{secret}"',
        'SecretType = TypeVar("SecretType")',
        'ACL_CREDENTIALS = "Access-Control-Allow-Credentials"',
        "tokens = tokenize(source_code_text)",
        'name = "an_ordinary_long_string_1234567"',
        'password = "<REDACTED>"',
        'password = "********"',
    ],
)
def test_ordinary_code_is_left_alone(line):
    assert scrub_secrets(line) == (line, {})


def _corpus(root: Path) -> Path:
    for ext, (lang, template) in LANGS.items():
        repo = root / f"{lang}-repo"
        repo.mkdir(parents=True)
        for i in range(4):
            (repo / f"conn{i}.{ext}").write_text(_fill(template, i) + "\n" * 3 + f"// padding {i}\n" * 12)
    repo = root / "config-repo"
    repo.mkdir()
    for name, text in CONFIGS.items():
        (repo / name).write_text(_fill(text) + "".join(f"key_{i} = value number {i}\n" for i in range(12)))
    return root


def _everything_written(out: Path, tokenizer) -> str:
    """Every output of the data stage as text: Arrow rows decoded, JSONL, stats, record."""
    parts = []
    for f in sorted(out.rglob("*")):
        if f.suffix == ".arrow":
            with pa.memory_map(str(f)) as src:
                table = pa.ipc.open_stream(src).read_all() if _is_stream(f) else pa.ipc.open_file(src).read_all()
            for ids in table.column("input_ids").to_pylist():
                parts.append(tokenizer.decode(ids))
        elif f.is_file() and f.suffix != ".png":
            parts.append(f.read_text(errors="replace"))
    return "\n".join(parts)


def _is_stream(f: Path) -> bool:
    return f.read_bytes()[:6] != b"ARROW1"


@pytest.mark.parametrize("fmt", ["sft", "cpt"])
def test_no_output_of_the_data_stage_holds_a_secret(tmp_path, tiny_qwen2_dir, make_config, fmt):
    from ferrylm.data import run_data
    from ferrylm.models import load_tokenizer

    corpus = _corpus(tmp_path / "corpus")
    exts = "[.py,.java,.go,.rs,.cpp,.env,.yaml,.properties]"
    common = [
        f"data.format={fmt}",
        f"data.extensions={exts}",
        "data.min_lines=5",
        "data.min_chars=50",
        "data.near_dedupe=false",
        "data.exact_dedupe=false",
        "data.eval_fraction=0.4",
        "data.max_seq_len=512",
    ]
    tok = load_tokenizer(tiny_qwen2_dir)
    # Control: unscrubbed, the secrets do land in the outputs (so the check below can fail).
    loose = make_config(tmp_path / "loose", tiny_qwen2_dir, corpus, *common, "data.scrub_secrets=false")
    run_data(loose)
    leaked = _everything_written(tmp_path / "loose" / "data", tok)
    assert all(s in leaked for s in SECRETS)

    cfg = make_config(tmp_path / "run", tiny_qwen2_dir, corpus, *common)
    record = run_data(cfg)
    written = _everything_written(tmp_path / "run" / "data", tok)
    assert [s for s in SECRETS if s in written] == []
    assert "<REDACTED>" in written
    stats = json.loads((tmp_path / "run" / "data" / "stats.json").read_text())
    by_kind = stats["secrets_scrubbed"]
    assert {"aws_access_key", "aws_secret_key", "github_token", "connection_password", "assigned_secret"} <= set(
        by_kind
    )
    if fmt == "sft":
        langs = {
            json.loads(line).get("language")
            for line in (tmp_path / "run" / "data" / "eval.jsonl").read_text().splitlines()
        }
        assert record.metrics["train_examples"] > 0 and langs
