"""The configured keys, scrubbed (agent/redaction.py): which values count as secrets, scrubbing
text, bytes and entries, the loop storing entries and summaries without them, the renderer's
outputs and the persister's net for entries appended elsewhere."""

from __future__ import annotations

import json

from ipyagent import AgentLoop, CompactionSettings, Session
from ipyagent.agent.redaction import Redactor, configured_secrets
from ipyagent.agent.run_config import RunConfig
from ipyagent.display.stream import RunRenderer
from ipyagent.hooks import HookRegistry
from ipyagent.kernel.persistence import Persister, SessionSlot
from ipyagent.testing import FakeProviderServer

KEY = "sk-proj-redaction-test-0123456789"


def test_which_values_are_secrets():
    environ = {"OPENAI_API_KEY": KEY, "AWS_SECRET_ACCESS_KEY": "aws/secret+value=0042",
               "GITHUB_TOKEN": "ghp_abcdefghijklmnop", "DB_PASSWORD": "hunter2hunter2",
               "SHORT_KEY": "abc",  # too short to scrub without hitting ordinary text
               "OPENAI_BASE_URL": "https://proxyuser:proxy%40pass@llm.example/v1",
               "PATH": "/usr/bin:/bin", "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock", "MAX_TOKENS": "40000000",
               "HOME": "/home/someone"}
    options = {"openai": {"api_key": "sk-from-provider-options-99", "timeout": 30,
                          "headers": {"Authorization": "Bearer tok-from-a-header-77", "User-Agent": "ipyagent-test/1"},
                          "base_url": "http://alice:wonderland-pass@localhost:8080/v1"},
               "anthropic": {"headers": {"x-api-key": "sk-ant-header-key-55"}}}
    secrets = configured_secrets(options, environ)
    for value in (KEY, "aws/secret+value=0042", "ghp_abcdefghijklmnop", "hunter2hunter2", "proxy@pass",
                  "sk-from-provider-options-99", "Bearer tok-from-a-header-77", "tok-from-a-header-77",
                  "wonderland-pass", "sk-ant-header-key-55"):
        assert value in secrets, value
    for value in ("abc", "/usr/bin:/bin", "/tmp/ssh-agent.sock", "40000000", "/home/someone", "ipyagent-test/1"):
        assert value not in secrets, value
    assert list(secrets) == sorted(secrets, key=lambda s: (-len(s), s))  # longest first: no partial leftovers


def test_text_bytes_and_data():
    redactor = Redactor.configured(environ={"OPENAI_API_KEY": KEY})
    assert redactor.text(f"OPENAI_API_KEY={KEY}\n") == "OPENAI_API_KEY=***\n"
    assert redactor.text("see https://bob:pw@example.com/x") == "see https://***@example.com/x"
    raw = b"\xff not utf-8 " + KEY.encode() + b"\n"
    assert redactor.bytes(raw) == b"\xff not utf-8 ***\n"
    entry = {"type": "message", "id": "a1", "message": {"role": "toolResult", "content": [
        {"type": "text", "text": f"key: {KEY}"}], "details": {"argv": ("env", KEY)}, "isError": False}}
    clean = redactor.data(entry)
    assert clean["message"]["content"][0]["text"] == "key: ***" and clean["message"]["details"]["argv"] == ("env", "***")
    assert entry["message"]["content"][0]["text"] == f"key: {KEY}"  # a copy: the original is left as it was
    assert Redactor().text(f"x {KEY}") == f"x {KEY}"  # nothing configured: nothing to scrub
    quoted = Redactor.configured(environ={"DB_PASSWORD": 'p&ss"wörd<1>'})
    assert quoted.text(json.dumps({"out": 'p&ss"wörd<1>'})) == '{"out": "***"}'  # as JSON escapes it
    assert quoted.text("<pre>p&amp;ss&quot;wörd&lt;1&gt;</pre>") == "<pre>***</pre>"  # as HTML escapes it


def test_the_loop_stores_no_key_and_neither_does_a_summary(monkeypatch):
    with FakeProviderServer() as server:
        server.register("fake", "openai")
        monkeypatch.setenv("FAKE_SERVICE_TOKEN", KEY)
        session = Session(hooks=HookRegistry())
        config = RunConfig(model="fake:test-model", context_window=4000,
                           compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=400))
        agent = AgentLoop(session, config=config, tools=[], sleep=lambda s: None, providers=server.providers)
        server.enqueue_summary(f"## Goal\nThe user's token is {KEY}; " + "tidy data " * 30)
        for i in range(6):
            server.enqueue_text(f"Answer {i}: the token is {KEY}. " + "the data look consistent and tidy " * 40)
            result = agent.prompt(f"Question {i}, token {KEY}: " + "tell me more about the columns " * 20)
            assert result.error is None and KEY not in result.text
        assert agent.session.compactions(), "the scenario must compact"
        assert KEY not in json.dumps(session.entries)
        assert "the token is ***" in json.dumps(session.entries)
        assert all(KEY not in json.dumps(r.body) for r in server.requests)  # not even the prompt was sent


def test_the_renderer_scrubs_every_output():
    shown: list[dict] = []

    class Handle:
        def update(self, data, **kwargs):
            shown.append(data)

    redactor = Redactor((KEY,))
    renderer = RunRenderer(display_func=lambda data, **kwargs: shown.append(data) or Handle(),
                           max_updates_per_second=0, redact=redactor.text)
    from ipyagent.agent import run_events as ev
    from ipyagent.providers import provider as pb

    renderer(pb.TextDelta(f"the key is {KEY[:10]}"))  # split across deltas: scrubbed once whole
    renderer(pb.TextDelta(f"{KEY[10:]} indeed"))
    renderer(ev.ToolExecutionStart("c1", "bash", {"command": f"echo {KEY}"}))
    renderer(ev.ToolExecutionEnd("c1", "bash", {"role": "toolResult", "content": [{"type": "text", "text": KEY}]}))
    renderer(ev.AgentError(f"failed with {KEY}"))
    renderer(ev.Notice(f"notice {KEY}"))
    renderer.finish()
    text = json.dumps(shown)
    assert KEY not in text and "the key is *** indeed" in text


def test_the_persister_scrubs_entries_appended_outside_the_loop():
    sent: list = []

    class Bridge:
        connected = True
        is_open = True

        def wait_for_frontend(self):
            return True

        def unacked(self, name):
            return {}

        def send_entries(self, name, entries, **kwargs):
            sent.extend(entries)

    session = Session(hooks=HookRegistry())
    session.append({"type": "custom", "customType": "ipyagent.pin", "data": {"text": f"my key is {KEY}"}})
    slot = SessionSlot("default", session)
    assert Persister(Bridge()).persist(slot, {}, redact=Redactor((KEY,)).data) == "bridge"
    assert json.dumps(sent).count("my key is ***") == 1 and KEY not in json.dumps(sent)
    assert not slot.unpersisted()
    # what a run streams as it goes is scrubbed the same way
    sent.clear()
    entry = session.append({"type": "custom", "customType": "ipyagent.pin", "data": {"text": f"again {KEY}"}})
    Persister(Bridge()).stream(slot, [entry], {}, redact=Redactor((KEY,)).data)
    assert json.dumps(sent).count("again ***") == 1 and KEY not in json.dumps(sent)


def test_the_common_names_of_secrets_count_and_the_working_folder_does_not():
    values = {"PGPASSWORD": "pg-secret-value-1", "MYSQL_PWD": "mysql-secret-value-2", "DB_PASS": "db-secret-value-3",
              "REDIS_PASS": "redis-secret-value-4", "PASSPHRASE": "a long passphrase 5",
              "API_KEYS": "key-one-6,key-two-6", "SECRETS": "the-secrets-value-7", "OPENAIKEY": "sk-together-key-8"}
    ordinary = {"PWD": "/home/someone/project", "OLDPWD": "/home/someone/before", "MAX_TOKENS": "40000000",
                "TOKENIZERS_PARALLELISM": "false-or-true", "PASSWORD_STORE_DIR": "/home/someone/.pass"}
    secrets = configured_secrets({}, {**values, **ordinary})
    for name, value in values.items():
        assert value in secrets, name
    for name, value in ordinary.items():
        if name != "PASSWORD_STORE_DIR":  # its name says password: scrubbing a folder is the safe mistake
            assert value not in secrets, name


def test_a_secret_used_as_a_dict_key_is_scrubbed_too():
    redactor = Redactor.configured(environ={}, extra=["tok-SECRETVALUE-123456"])
    structured = {"structuredContent": {"tok-SECRETVALUE-123456": {"owner": "tok-SECRETVALUE-123456"}, "n": 1}}
    clean = redactor.data(structured)
    assert "tok-SECRETVALUE-123456" not in json.dumps(clean)
    assert clean == {"structuredContent": {"***": {"owner": "***"}, "n": 1}}


def test_the_secrets_a_notebooks_code_sets_itself_are_found():
    from ipyagent.agent.redaction import assigned_secrets

    code = ("%env OPENAI_API_KEY=sk-abc123456789\n%env MY_TOKEN  tok-99999999 \n%set_env DB_PASS=hunter22222\n"
            "%env PATH=/usr/local/bin\nimport os\nos.environ['GITHUB_TOKEN'] = \"ghp_abcdefgh123\"\n"
            "os.environ['HOME'] = '/home/someone'\n!export AWS_SECRET_ACCESS_KEY=abcdefghijk && ls\n"
            'export API_KEY="quoted-value-123"\nexport EDITOR=vim-with-a-long-name')
    assert assigned_secrets(code) == ["sk-abc123456789", "tok-99999999", "hunter22222", "ghp_abcdefgh123",
                                      "abcdefghijk", "quoted-value-123"]
