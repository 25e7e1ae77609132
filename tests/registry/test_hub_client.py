"""registry.hub.HubClient against the fake Hub: a real HTTP server driven by the real huggingface_hub client."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import HfApi

from registry.hub import (
    BadResponse,
    BudgetExhausted,
    GatedRepo,
    HubClient,
    HubFile,
    HubUnavailable,
    RateLimited,
    RepoNotFound,
    RevisionNotFound,
    weight_digest,
)
from tests.fakehub import FakeHub, Scenario
from tests.fakehub.scenario import (
    LLAMA_31_8B_INSTRUCT_SHA,
    QWEN3_8B_SHA,
    ZLAB_QWEN3_8B_DFLASH_SHA,
    QWEN3_8B_CONFIG,
    dense_parameter_count,
)

DRAFTER = "z-lab/Qwen3-8B-DFlash-b16"
TOKEN = "hf_fakeTOKENvalue0123456789abcdefXYZ"


@pytest.fixture(autouse=True)
def no_hub_telemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface_hub reads HF_HUB_DISABLE_TELEMETRY at import, before conftest can set it; without it the
    user-agent code fetches an agent registry from huggingface.co, which tests must never reach."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_TELEMETRY", True)


@pytest.fixture
def scenario() -> Scenario:
    return Scenario.standard()


@pytest.fixture
def hub(scenario: Scenario) -> Iterator[FakeHub]:
    with FakeHub(scenario.state, page_size=2, max_page_size=2) as running:
        yield running


def make_client(hub: FakeHub, tmp_path: Path, token: str | None = None, **options: float | int | None) -> HubClient:
    settings: dict = {"timeout": 2.0, "backoff_base": 0.01, "backoff_cap": 0.05, "max_rate_limit_wait": 2.0}
    settings.update(options)
    return HubClient(hub.url, token, tmp_path / "hub-cache", **settings)


@pytest.fixture
def client(hub: FakeHub, tmp_path: Path) -> HubClient:
    return make_client(hub, tmp_path)


# ---- listing -------------------------------------------------------------------------------------------------

def test_listing_pages_through_the_org_newest_first(hub: FakeHub, client: HubClient) -> None:
    models = list(client.list_org_models("Qwen"))

    assert [m.repo_id for m in models] == ["Qwen/Qwen3-8B-FP8", "Qwen/Qwen3-4B", "Qwen/Qwen3-8B"]
    assert hub.count("GET", r"^/api/models$") == 2  # page size 2: two pages
    assert client.request_count == 2
    qwen3_8b = models[2]
    assert qwen3_8b.sha == QWEN3_8B_SHA
    assert qwen3_8b.base_models == ("Qwen/Qwen3-8B-Base",) and qwen3_8b.base_model_relation == "finetune"
    assert models[0].base_models == ("Qwen/Qwen3-8B",) and models[0].base_model_relation == "quantized"
    assert qwen3_8b.pipeline_tag == "text-generation" and qwen3_8b.library_name == "transformers"
    assert qwen3_8b.created_at.year == 2025 and not qwen3_8b.gated


def test_listing_by_creation_date(client: HubClient, scenario: Scenario) -> None:
    scenario.advance("qwen35_27b_appears")
    newest = next(client.list_org_models("Qwen", sort="created_at"))
    assert newest.repo_id == "Qwen/Qwen3.5-27B"


def test_unchanged_repoll_costs_one_request_per_org(hub: FakeHub, client: HubClient, scenario: Scenario) -> None:
    seen = {m.repo_id: m.sha for org in ("Qwen", "z-lab") for m in client.list_org_models(org)}
    hub.clear_requests()
    before = client.request_count

    def already_seen(model) -> bool:  # noqa: ANN001 - HubModel
        return seen.get(model.repo_id) == model.sha

    fresh = [m for org in ("Qwen", "z-lab") for m in client.list_org_models(org, stop_at=already_seen)]

    assert fresh == []
    assert client.request_count - before == 2
    assert hub.count("GET", r"^/api/models$") == 2

    scenario.advance_through("weights_replaced")  # a new Qwen repo, a new z-lab repo, a z-lab commit
    hub.clear_requests()
    fresh = [m.repo_id for org in ("Qwen", "z-lab") for m in client.list_org_models(org, stop_at=already_seen)]
    assert fresh == ["Qwen/Qwen3.5-27B", DRAFTER, "z-lab/Qwen3.5-27B-DFlash"]


def test_listing_is_lazy_so_a_consumer_can_stop_early(hub: FakeHub, client: HubClient) -> None:
    first = next(client.list_org_models("Qwen"))
    assert first.repo_id == "Qwen/Qwen3-8B-FP8"
    assert hub.count("GET", r"^/api/models$") == 1


# ---- revisions, refs, commits --------------------------------------------------------------------------------

def test_revision_lists_files_with_blob_ids(client: HubClient, scenario: Scenario) -> None:
    revision = client.revision(DRAFTER)
    repo = scenario.state.repo(DRAFTER)
    assert repo is not None

    assert revision.repo_id == DRAFTER and revision.sha == ZLAB_QWEN3_8B_DFLASH_SHA
    files = {f.path: f for f in revision.files}
    assert set(files) == set(repo.files)
    weights = files["model.safetensors"]
    assert weights.size == len(repo.files["model.safetensors"])
    assert weights.lfs_sha256 == hashlib.sha256(repo.files["model.safetensors"]).hexdigest()
    config = files["config.json"]
    assert config.lfs_sha256 is None
    assert config.blob_id == hashlib.sha1(
        b"blob %d\0" % len(repo.files["config.json"]) + repo.files["config.json"]).hexdigest()
    assert revision.parameters == dense_parameter_count(repo_config(scenario, DRAFTER))
    assert "dflash" in revision.tags and not revision.gated


def repo_config(scenario: Scenario, repo_id: str) -> dict:
    repo = scenario.state.repo(repo_id)
    assert repo is not None
    return json.loads(repo.files["config.json"])


def test_revision_at_an_old_sha_and_parameters_of_a_target(client: HubClient, scenario: Scenario) -> None:
    scenario.advance("weights_replaced")
    old = client.revision(DRAFTER, ZLAB_QWEN3_8B_DFLASH_SHA)
    new = client.revision(DRAFTER)
    assert old.sha == ZLAB_QWEN3_8B_DFLASH_SHA and new.sha != old.sha
    assert new.last_modified > old.last_modified
    assert client.revision("Qwen/Qwen3-8B").parameters == 8_190_735_360 == dense_parameter_count(QWEN3_8B_CONFIG)


def test_head_sha_follows_main(client: HubClient, scenario: Scenario) -> None:
    assert client.head_sha(DRAFTER) == ZLAB_QWEN3_8B_DFLASH_SHA
    scenario.advance_through("readme_only_commit")
    head = client.head_sha(DRAFTER)
    assert head != ZLAB_QWEN3_8B_DFLASH_SHA
    assert client.revision(DRAFTER).sha == head


def test_renamed_repo_resolves_to_one_canonical_id(client: HubClient, scenario: Scenario) -> None:
    scenario.advance("repo_renamed")
    old_name = "meta-llama/Meta-Llama-3.1-8B-Instruct"
    revision = client.revision(old_name)
    assert revision.repo_id == "meta-llama/Llama-3.1-8B-Instruct"
    assert revision.sha == LLAMA_31_8B_INSTRUCT_SHA
    assert client.head_sha(old_name) == LLAMA_31_8B_INSTRUCT_SHA
    assert revision.gated


def test_missing_repo_and_revision(client: HubClient) -> None:
    with pytest.raises(RepoNotFound, match="nobody/nothing"):
        client.revision("nobody/nothing")
    with pytest.raises(RepoNotFound):
        client.head_sha("nobody/nothing")
    with pytest.raises(RevisionNotFound):
        client.revision(DRAFTER, "0" * 40)
    with pytest.raises(RepoNotFound):
        client.download("nobody/nothing", "config.json", "0" * 40)


# ---- downloads -----------------------------------------------------------------------------------------------

def test_download_is_pinned_to_the_sha_and_cached(hub: FakeHub, client: HubClient, scenario: Scenario) -> None:
    old_bytes = scenario.state.repo(DRAFTER).files["model.safetensors"]  # type: ignore[union-attr]
    assert client.download(DRAFTER, "model.safetensors", ZLAB_QWEN3_8B_DFLASH_SHA) == old_bytes

    scenario.advance("weights_replaced")
    new_sha = client.head_sha(DRAFTER)
    new_bytes = client.download(DRAFTER, "model.safetensors", new_sha)
    assert new_bytes is not None and new_bytes != old_bytes

    hub.clear_requests()
    before = client.request_count
    assert client.download(DRAFTER, "model.safetensors", ZLAB_QWEN3_8B_DFLASH_SHA) == old_bytes
    assert client.request_count == before and hub.requests == []  # warm cache: no request at all


def test_missing_file_is_none(client: HubClient) -> None:
    assert client.download(DRAFTER, "tokenizer.json", ZLAB_QWEN3_8B_DFLASH_SHA) is None


def test_download_needs_a_commit_sha(client: HubClient) -> None:
    with pytest.raises(ValueError, match="40-hex"):
        client.download(DRAFTER, "config.json", "main")


def test_gated_repo(hub: FakeHub, tmp_path: Path, scenario: Scenario) -> None:
    gated = "z-lab/Kimi-K2.6-DFlash"
    anonymous = make_client(hub, tmp_path / "a")
    revision = anonymous.revision(gated)  # metadata of a gated repo is public
    assert revision.gated
    with pytest.raises(GatedRepo):
        anonymous.download(gated, "config.json", revision.sha)
    with pytest.raises(GatedRepo):
        make_client(hub, tmp_path / "b", token=TOKEN).download(gated, "config.json", revision.sha)

    scenario.state.set_gated(gated, "manual", granted_tokens=[TOKEN])
    config = make_client(hub, tmp_path / "c", token=TOKEN).download(gated, "config.json", revision.sha)
    assert config is not None and b"DFlashDraftModel" in config


# ---- politeness and faults -----------------------------------------------------------------------------------

def test_rate_limit_waits_then_retries(hub: FakeHub, client: HubClient, scenario: Scenario,
                                       caplog: pytest.LogCaptureFixture) -> None:
    scenario.state.inject(r"^/api/models$", "429", times=1, seconds=1)
    with caplog.at_level(logging.INFO, logger="registry.hub"):
        models = list(client.list_org_models("z-lab"))
    assert len(models) == 3
    assert hub.count("GET", r"^/api/models$") == 3  # 429, then two pages
    assert "retry after 1s" in caplog.text  # waited what the server asked


def test_long_rate_limit_is_reported_not_slept(hub: FakeHub, client: HubClient, scenario: Scenario) -> None:
    scenario.state.inject(r"/refs$", "429", times=1, seconds=120)
    with pytest.raises(RateLimited) as raised:
        client.head_sha(DRAFTER)
    assert raised.value.retry_after == 120
    assert hub.count(path_regex=r"/refs$") == 1


def test_persistent_rate_limit_gives_up(hub: FakeHub, client: HubClient, scenario: Scenario) -> None:
    scenario.state.inject(r"/refs$", "429", times=None, seconds=0)
    with pytest.raises(RateLimited):
        client.head_sha(DRAFTER)
    assert hub.count(path_regex=r"/refs$") == client.max_retries + 1


@pytest.mark.parametrize("kind", ["500", "503", "reset", "timeout"])
def test_transient_failures_are_retried(hub: FakeHub, tmp_path: Path, scenario: Scenario, kind: str) -> None:
    client = make_client(hub, tmp_path, timeout=0.5)
    scenario.state.inject(r"^/api/models/z-lab/", kind, times=2, seconds=1.5)
    assert client.revision(DRAFTER).sha == ZLAB_QWEN3_8B_DFLASH_SHA
    assert hub.count(path_regex=r"^/api/models/z-lab/") == 3
    assert client.request_count == 3


def test_failure_in_the_middle_of_a_listing_is_retried(hub: FakeHub, client: HubClient,
                                                       scenario: Scenario) -> None:
    listing = client.list_org_models("z-lab")
    page_one = [next(listing), next(listing)]
    scenario.state.inject(r"^/api/models$", "503", times=1)  # hits the request for page 2
    page_two = list(listing)
    assert [m.repo_id for m in page_one + page_two] == [m.repo_id for m in client.list_org_models("z-lab")]
    assert len(page_two) == 1
    assert scenario.state.take_fault("/api/models") is None  # the 503 was served


def test_persistent_503_gives_up_without_multiplying_retries(hub: FakeHub, client: HubClient,
                                                               scenario: Scenario) -> None:
    scenario.state.inject(r"^/api/models", "503", times=None)
    with pytest.raises(HubUnavailable, match="503"):
        list(client.list_org_models("Qwen"))
    # huggingface_hub's own http_backoff would add 5 retries per attempt (and 23 s of sleeps) if it saw the 503s
    assert hub.count() == client.max_retries + 1
    with pytest.raises(HubUnavailable):
        client.revision(DRAFTER)
    assert hub.count() == 2 * (client.max_retries + 1)


def test_persistent_503_on_download(hub: FakeHub, client: HubClient, scenario: Scenario) -> None:
    scenario.state.inject(r"/resolve/", "503", times=None)
    with pytest.raises(HubUnavailable):
        client.download(DRAFTER, "config.json", ZLAB_QWEN3_8B_DFLASH_SHA)
    assert hub.count(path_regex="/resolve/") == client.max_retries + 1


def test_persistent_timeout_is_unavailable(hub: FakeHub, tmp_path: Path, scenario: Scenario) -> None:
    client = make_client(hub, tmp_path, timeout=0.3, max_retries=1)
    scenario.state.inject(r"/refs$", "timeout", times=None, seconds=1.0)
    with pytest.raises(HubUnavailable, match="Timeout"):
        client.head_sha(DRAFTER)
    assert hub.count(path_regex=r"/refs$") == 2


def test_unreachable_hub_is_unavailable(tmp_path: Path) -> None:
    with FakeHub(Scenario.standard().state) as gone:
        url = gone.url
    client = HubClient(url, None, tmp_path, timeout=0.5, max_retries=1, backoff_base=0.01)
    with pytest.raises(HubUnavailable):
        client.head_sha(DRAFTER)


@pytest.mark.parametrize("mode", ["full_length", "short"])
def test_truncated_json_is_a_bad_response(hub: FakeHub, client: HubClient, scenario: Scenario, mode: str) -> None:
    scenario.state.inject(r"^/api/models/z-lab/", "truncated", times=1, mode=mode)  # type: ignore[arg-type]
    with pytest.raises(BadResponse):
        client.revision(DRAFTER)
    assert client.revision(DRAFTER).sha == ZLAB_QWEN3_8B_DFLASH_SHA  # nothing sticky


def test_truncated_listing_page_is_a_bad_response(client: HubClient, scenario: Scenario) -> None:
    scenario.state.inject(r"^/api/models$", "truncated", times=1, mode="short")
    with pytest.raises(BadResponse):
        list(client.list_org_models("Qwen"))


def test_slow_answers_within_the_timeout_succeed(hub: FakeHub, client: HubClient, scenario: Scenario) -> None:
    scenario.state.inject(r"/refs$", "slow", times=1, seconds=0.2)
    assert client.head_sha(DRAFTER) == ZLAB_QWEN3_8B_DFLASH_SHA
    assert hub.count(path_regex=r"/refs$") == 1


def test_request_budget(hub: FakeHub, tmp_path: Path) -> None:
    client = make_client(hub, tmp_path, max_requests=3)
    client.head_sha(DRAFTER)
    list(client.list_org_models("Qwen"))  # two pages
    with pytest.raises(BudgetExhausted):
        client.revision(DRAFTER)
    assert client.request_count == 3
    assert hub.count() == 3


def test_requests_outside_a_client_call_are_not_counted(hub: FakeHub, client: HubClient) -> None:
    client.head_sha(DRAFTER)
    HfApi(endpoint=hub.url, token=False).model_info(DRAFTER)
    assert client.request_count == 1
    assert hub.count() == 2


# ---- the token -----------------------------------------------------------------------------------------------

def test_token_is_sent_but_never_logged_or_shown(hub: FakeHub, tmp_path: Path, scenario: Scenario,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    client = make_client(hub, tmp_path, token=TOKEN)
    scenario.state.inject(r"/refs$", "503", times=1)
    errors: list[str] = []
    with caplog.at_level(logging.DEBUG):
        client.head_sha(DRAFTER)
        list(client.list_org_models("Qwen"))
        client.download(DRAFTER, "config.json", ZLAB_QWEN3_8B_DFLASH_SHA)
        for call in (lambda: client.revision("nobody/nothing"),
                     lambda: client.download("z-lab/Kimi-K2.6-DFlash", "config.json", "0" * 40),
                     lambda: client.revision(DRAFTER, "1" * 40)):
            with pytest.raises((RepoNotFound, GatedRepo, RevisionNotFound)) as raised:
                call()
            errors.append(str(raised.value))
            errors.append(repr(raised.value))

    assert {r.authorization for r in hub.requests} == {f"Bearer {TOKEN}"}
    assert caplog.records, "DEBUG logging was captured"
    assert TOKEN not in caplog.text
    assert all(TOKEN not in text and "\n" not in text for text in errors)
    assert TOKEN not in repr(client)


def test_no_token_sends_no_authorization(hub: FakeHub, client: HubClient,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)  # an ambient token must not leak to the Hub either
    client.head_sha(DRAFTER)
    assert [r.authorization for r in hub.requests] == [None]


# ---- weight digest -------------------------------------------------------------------------------------------

def test_weight_digest_changes_only_with_weights(client: HubClient, scenario: Scenario) -> None:
    first = weight_digest(client.revision(DRAFTER).files)
    scenario.advance("weights_replaced")
    replaced_revision = client.revision(DRAFTER)
    replaced = weight_digest(replaced_revision.files)
    scenario.advance("readme_only_commit")
    readme_only = client.revision(DRAFTER)
    assert first is not None and replaced is not None
    assert replaced != first
    assert weight_digest(readme_only.files) == replaced
    assert readme_only.sha != replaced_revision.sha


def test_weight_digest_edge_cases() -> None:
    assert weight_digest([HubFile("README.md", 10, "a" * 40, None)]) is None
    index = HubFile("model.safetensors.index.json", 10, "b" * 40, None)
    shard = HubFile("model-00001-of-00002.safetensors", 99, "c" * 40, "d" * 64)
    assert weight_digest([index, shard]) == weight_digest([shard, index])
    assert weight_digest([index, shard]) != weight_digest([shard])
    with pytest.raises(ValueError, match="blob id"):
        weight_digest([HubFile("model.safetensors", None, None, None)])


def test_constructor_rejects_bad_settings(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        HubClient("huggingface.co", None, tmp_path)
    with pytest.raises(ValueError):
        HubClient("http://127.0.0.1:1", None, tmp_path, timeout=0)
