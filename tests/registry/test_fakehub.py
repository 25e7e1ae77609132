"""The fake Hub itself: wire protocol (raw HTTP), what the real huggingface_hub client reads from it, its state
model, fault injection and the scenario timeline."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import (
    BadRequestError,
    GatedRepoError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import httpx
from safetensors import safe_open
from safetensors.torch import load as load_safetensors
from tokenizers import Tokenizer

from tests.fakehub import FakeHub, HubState, Scenario, dflash_drafter_files, target_files
from tests.fakehub.scenario import (
    DAY_0,
    LLAMA_31_8B_INSTRUCT_SHA,
    QWEN3_4B_SHA,
    QWEN3_8B_DFLASH_CONFIG,
    QWEN3_8B_SHA,
    ZLAB_QWEN3_8B_DFLASH_SHA,
)
from tests.fakehub.state import git_blob_sha, utc

DRAFTER = "z-lab/Qwen3-8B-DFlash-b16"


@pytest.fixture(autouse=True)
def no_hub_telemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface_hub reads HF_HUB_DISABLE_TELEMETRY at import; without it it would call huggingface.co."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_TELEMETRY", True)


@pytest.fixture
def scenario() -> Scenario:
    return Scenario.standard()


@pytest.fixture
def hub(scenario: Scenario) -> Iterator[FakeHub]:
    with FakeHub(scenario.state, page_size=2, commits_page_size=2) as running:
        yield running


@pytest.fixture
def http(hub: FakeHub) -> Iterator[httpx.Client]:
    """A bare HTTP client: no retries, no redirects followed, so the server's answers are seen as sent."""
    with httpx.Client(base_url=hub.url, timeout=5.0, follow_redirects=False) as client:
        yield client


@pytest.fixture
def api(hub: FakeHub) -> HfApi:
    return HfApi(endpoint=hub.url, token=False)


# ---- listing -------------------------------------------------------------------------------------------------

def test_listing_pages_with_absolute_link_carrying_all_params(http: httpx.Client, hub: FakeHub) -> None:
    first = http.get("/api/models", params=[("author", "Qwen"), ("sort", "lastModified"), ("expand", "sha"),
                                            ("expand", "lastModified")])
    assert first.status_code == 200
    assert [m["id"] for m in first.json()] == ["Qwen/Qwen3-8B-FP8", "Qwen/Qwen3-4B"]
    assert set(first.json()[0]) == {"_id", "id", "sha", "lastModified"}  # only the expanded fields
    next_url = first.links["next"]["url"]
    assert next_url.startswith(hub.url + "/api/models?")
    second = http.get(next_url)
    query = hub.requests[-1].query
    assert query["author"] == ["Qwen"] and query["expand"] == ["sha", "lastModified"] and "cursor" in query
    assert [m["id"] for m in second.json()] == ["Qwen/Qwen3-8B"]
    assert "next" not in second.links
    assert all("X-Request-Id" in r.headers for r in (first, second))


def test_listing_through_the_real_client(api: HfApi, scenario: Scenario) -> None:
    scenario.advance("qwen35_27b_appears")
    by_created = [m.id for m in api.list_models(author="Qwen", sort="created_at")]
    assert by_created[0] == "Qwen/Qwen3.5-27B" and len(by_created) == 4
    full = list(api.list_models(author="Qwen", search="8b", full=True, cardData=True, fetch_config=True))
    assert {m.id for m in full} == {"Qwen/Qwen3-8B", "Qwen/Qwen3-8B-FP8"}
    qwen3_8b = next(m for m in full if m.id == "Qwen/Qwen3-8B")
    assert qwen3_8b.sha == QWEN3_8B_SHA and qwen3_8b.config["model_type"] == "qwen3"
    assert qwen3_8b.card_data.base_model == ["Qwen/Qwen3-8B-Base"]
    assert [s.rfilename for s in qwen3_8b.siblings][:2] == [".gitattributes", "README.md"]
    assert len(list(api.list_models(author="Qwen", limit=3))) == 3


def test_listing_filters_on_model_tree_tags(api: HfApi) -> None:
    derivatives = {m.id for m in api.list_models(filter="base_model:Qwen/Qwen3-8B")}
    assert derivatives == {"Qwen/Qwen3-8B-FP8", "acme-labs/Qwen3-8B-Support-FT"}
    quants = [m.id for m in api.list_models(filter="base_model:quantized:Qwen/Qwen3-8B")]
    assert quants == ["Qwen/Qwen3-8B-FP8"]
    assert {m.id for m in api.list_models(filter=["dflash"], author="z-lab")} == {
        "z-lab/Qwen3-4B-DFlash-b16", DRAFTER, "z-lab/Kimi-K2.6-DFlash"}
    assert [m.id for m in api.list_models(author="z-lab", gated=True)] == ["z-lab/Kimi-K2.6-DFlash"]


def test_listing_rejects_what_the_hub_rejects(http: httpx.Client) -> None:
    assert http.get("/api/models", params={"expand": "sha", "full": "true"}).status_code == 400
    assert http.get("/api/models", params={"expand": "nonsense"}).status_code == 400
    assert http.get("/api/models", params={"sort": "nonsense"}).status_code == 400
    assert http.get("/api/models", params={"cursor": "!!"}).status_code == 400
    skipped = http.get("/api/models", params={"author": "Qwen", "sort": "lastModified", "skip": "1"})
    assert [m["id"] for m in skipped.json()] == ["Qwen/Qwen3-4B", "Qwen/Qwen3-8B"]


def test_listing_expand_error_through_the_client(api: HfApi) -> None:
    with pytest.raises(BadRequestError):
        list(api.list_models(expand=["nonsense"]))  # type: ignore[list-item]


# ---- one model -----------------------------------------------------------------------------------------------

def test_model_info_with_blobs(api: HfApi, scenario: Scenario) -> None:
    info = api.model_info(DRAFTER, files_metadata=True, securityStatus=False)
    repo = scenario.state.repo(DRAFTER)
    assert repo is not None
    assert info.sha == ZLAB_QWEN3_8B_DFLASH_SHA and info.last_modified == repo.last_modified
    siblings = {s.rfilename: s for s in info.siblings}
    weights, config = siblings["model.safetensors"], siblings["config.json"]
    assert weights.lfs is not None and weights.lfs.sha256 == hashlib.sha256(repo.files["model.safetensors"]).hexdigest()
    assert weights.size == len(repo.files["model.safetensors"])
    assert config.lfs is None and config.blob_id == git_blob_sha(repo.files["config.json"])
    assert info.config == {"architectures": ["DFlashDraftModel"], "model_type": "qwen3"}


def test_model_info_expand_and_security(api: HfApi) -> None:
    info = api.model_info("Qwen/Qwen3-8B", expand=["baseModels", "childrenModelCount", "safetensors"])
    assert info.base_models == {"relation": "finetune", "models": [{"id": "Qwen/Qwen3-8B-Base"}]}
    assert info.children_model_count == 2
    assert info.safetensors.total == 8_190_735_360
    assert info.sha is None  # not expanded
    assert api.model_info(DRAFTER, securityStatus=True).security_repo_status["scansDone"] is True


def test_revisions_refs_and_commits(api: HfApi, http: httpx.Client, scenario: Scenario) -> None:
    scenario.advance("weights_replaced")
    head = api.list_repo_refs(DRAFTER).branches[0]
    assert head.name == "main" and head.target_commit == scenario.state.repo(DRAFTER).sha  # type: ignore[union-attr]
    old = api.model_info(DRAFTER, revision=ZLAB_QWEN3_8B_DFLASH_SHA)
    assert old.sha == ZLAB_QWEN3_8B_DFLASH_SHA
    with pytest.raises(RevisionNotFoundError):
        api.model_info(DRAFTER, revision="f" * 40)
    commits = api.list_repo_commits(DRAFTER, formatted=True)  # 3 commits over 2 pages
    assert [c.title for c in commits] == ["Upload retrained weights", "Upload folder using huggingface_hub",
                                          "initial commit"]
    assert commits[-1].authors == ["system"] and commits[0].formatted_title
    older = api.list_repo_commits(DRAFTER, revision=ZLAB_QWEN3_8B_DFLASH_SHA)
    assert [c.commit_id for c in older][0] == ZLAB_QWEN3_8B_DFLASH_SHA
    plain = http.get(f"/api/models/{DRAFTER}/commits/main", params={"expand": "formatted"}).json()
    assert "formatted" in plain[0]


def test_missing_repo(api: HfApi, http: httpx.Client) -> None:
    with pytest.raises(RepositoryNotFoundError):
        api.model_info("nobody/nothing")
    response = http.head("/nobody/nothing/resolve/main/config.json")
    assert response.status_code == 404 and response.headers["X-Error-Code"] == "RepoNotFound"


# ---- files ---------------------------------------------------------------------------------------------------

def test_resolve_headers_range_and_etag(http: httpx.Client, scenario: Scenario) -> None:
    repo = scenario.state.repo(DRAFTER)
    assert repo is not None
    head = http.head(f"/{DRAFTER}/resolve/main/model.safetensors")
    content = repo.files["model.safetensors"]
    # An LFS file: a 302 to the CDN (another host) carrying the file's metadata, as on the Hub.
    assert head.status_code == 302
    assert head.headers["X-Repo-Commit"] == ZLAB_QWEN3_8B_DFLASH_SHA
    assert head.headers["X-Linked-Etag"] == f'"{hashlib.sha256(content).hexdigest()}"'
    assert int(head.headers["X-Linked-Size"]) == len(content)
    assert head.headers["Location"].startswith("http://localhost:")
    ranged = http.get(f"/{DRAFTER}/resolve/main/model.safetensors", headers={"Range": "bytes=0-7"},
                      follow_redirects=True)
    assert ranged.status_code == 206 and ranged.content == content[:8]
    assert ranged.headers["Content-Range"] == f"bytes 0-7/{len(content)}"
    # A small file on a branch: a 307 to the commit-pinned resolve cache.
    moved = http.head(f"/{DRAFTER}/resolve/main/config.json")
    assert moved.status_code == 307
    assert moved.headers["Location"].startswith(f"/api/resolve-cache/models/{DRAFTER}/{ZLAB_QWEN3_8B_DFLASH_SHA}/")
    config_etag = http.head(moved.headers["Location"]).headers["ETag"]
    assert config_etag == f'"{git_blob_sha(repo.files["config.json"])}"'
    cached = http.get(f"/{DRAFTER}/resolve/{ZLAB_QWEN3_8B_DFLASH_SHA}/config.json",
                      headers={"If-None-Match": config_etag})
    assert cached.status_code == 304


def test_resolve_errors(http: httpx.Client) -> None:
    missing = http.head(f"/{DRAFTER}/resolve/main/nope.json")
    assert missing.status_code == 404 and missing.headers["X-Error-Code"] == "EntryNotFound"
    assert missing.headers["X-Repo-Commit"] == ZLAB_QWEN3_8B_DFLASH_SHA
    bad_revision = http.head(f"/{DRAFTER}/resolve/{'e' * 40}/config.json")
    assert bad_revision.status_code == 404 and bad_revision.headers["X-Error-Code"] == "RevisionNotFound"


def test_download_through_the_real_client_is_pinned(hub: FakeHub, scenario: Scenario, tmp_path: Path) -> None:
    old = hf_hub_download(DRAFTER, "model.safetensors", revision=ZLAB_QWEN3_8B_DFLASH_SHA, endpoint=hub.url,
                          token=False, cache_dir=tmp_path)
    scenario.advance("weights_replaced")
    new = hf_hub_download(DRAFTER, "model.safetensors", revision="main", endpoint=hub.url, token=False,
                          cache_dir=tmp_path)
    assert Path(old).read_bytes() != Path(new).read_bytes()
    assert f"/snapshots/{ZLAB_QWEN3_8B_DFLASH_SHA}/" in old
    with safe_open(new, framework="pt") as weights:
        assert "fc.weight" in weights.keys()


def test_gated_repo_needs_a_granted_token(http: httpx.Client, api: HfApi, scenario: Scenario,
                                          hub: FakeHub, tmp_path: Path) -> None:
    gated = "z-lab/Kimi-K2.6-DFlash"
    assert api.model_info(gated).gated == "manual"
    anonymous = http.head(f"/{gated}/resolve/main/config.json")
    assert anonymous.status_code == 401 and anonymous.headers["X-Error-Code"] == "GatedRepo"
    stranger = http.head(f"/{gated}/resolve/main/config.json", headers={"Authorization": "Bearer hf_other"})
    assert stranger.status_code == 403 and stranger.headers["X-Error-Code"] == "GatedRepo"
    with pytest.raises(GatedRepoError):
        hf_hub_download(gated, "config.json", endpoint=hub.url, token=False, cache_dir=tmp_path)
    scenario.state.set_gated(gated, "manual", granted_tokens=["hf_member"])
    member = http.head(f"/{gated}/resolve/main/config.json", headers={"Authorization": "Bearer hf_member"},
                       follow_redirects=True)
    assert member.status_code == 200


def test_renamed_repo_redirects_relatively(http: httpx.Client, api: HfApi, scenario: Scenario,
                                           hub: FakeHub, tmp_path: Path) -> None:
    scenario.advance("repo_renamed")
    old, new = "meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"
    info = http.get(f"/api/models/{old}", params={"blobs": "true"})
    assert info.status_code == 307 and info.headers["Location"] == f"/api/models/{new}?blobs=true"
    resolve = http.head(f"/{old}/resolve/main/config.json")
    assert resolve.status_code == 307 and resolve.headers["Location"] == f"/{new}/resolve/main/config.json"
    assert api.model_info(old).id == new
    assert api.list_repo_refs(old).branches[0].target_commit == LLAMA_31_8B_INSTRUCT_SHA
    scenario.state.set_gated(new, False)
    path = hf_hub_download(old, "config.json", endpoint=hub.url, token=False, cache_dir=tmp_path)
    assert json.loads(Path(path).read_text())["model_type"] == "llama"


def test_every_response_has_a_request_id(http: httpx.Client) -> None:
    for response in (http.get("/api/models"), http.get("/nowhere"), http.head(f"/{DRAFTER}/resolve/main/x")):
        assert response.headers["X-Request-Id"].startswith("fakehub-")


# ---- faults (seen raw: no client retries) --------------------------------------------------------------------

def test_fault_429_announces_its_wait(http: httpx.Client, scenario: Scenario) -> None:
    scenario.state.inject(r"^/api/models$", "429", times=1, seconds=1)
    limited = http.get("/api/models")
    assert limited.status_code == 429
    assert limited.headers["Retry-After"] == "1" and limited.headers["RateLimit"] == '"api";r=0;t=1'
    assert http.get("/api/models").status_code == 200  # used up


def test_fault_5xx_counts_down_and_matches_paths(http: httpx.Client, scenario: Scenario) -> None:
    fault = scenario.state.inject(r"/refs$", "500", times=2)
    scenario.state.inject(r"/refs$", "503", times=1)
    assert http.get(f"/api/models/{DRAFTER}").status_code == 200  # other paths untouched
    statuses = [http.get(f"/api/models/{DRAFTER}/refs").status_code for _ in range(4)]
    assert statuses == [500, 500, 503, 200]
    assert fault.served == 2


def test_fault_timeout_slow_reset_truncated(hub: FakeHub, scenario: Scenario) -> None:
    state = scenario.state
    with httpx.Client(base_url=hub.url, timeout=0.3) as impatient:
        state.inject(r"/refs$", "timeout", times=1, seconds=1.0)
        with pytest.raises(httpx.TimeoutException):
            impatient.get(f"/api/models/{DRAFTER}/refs")
        state.inject(r"/refs$", "slow", times=1, seconds=0.1)
        assert impatient.get(f"/api/models/{DRAFTER}/refs").status_code == 200
        state.inject(r"/refs$", "reset", times=1)
        with pytest.raises(httpx.TransportError):
            impatient.get(f"/api/models/{DRAFTER}/refs")
        state.inject(r"/refs$", "truncated", times=1, mode="full_length")
        with pytest.raises(httpx.TransportError):
            impatient.get(f"/api/models/{DRAFTER}/refs")
        state.inject(r"/refs$", "truncated", times=1, mode="short")
        short = impatient.get(f"/api/models/{DRAFTER}/refs")
        with pytest.raises(ValueError):
            short.json()
        assert impatient.get(f"/api/models/{DRAFTER}/refs").json()["branches"][0]["name"] == "main"


def test_inject_validates(scenario: Scenario) -> None:
    with pytest.raises(ValueError, match="unknown fault kind"):
        scenario.state.inject(".*", "teapot")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        scenario.state.inject(".*", "500", times=0)


# ---- state -------------------------------------------------------------------------------------------------

def test_state_is_deterministic_and_commits_build_on_the_head() -> None:
    first, second = Scenario.standard(), Scenario.standard()
    for scenario in (first, second):
        scenario.advance_through("qwen36_27b_appears")
    assert [(r.repo_id, r.sha) for r in first.state.repos()] == [(r.repo_id, r.sha) for r in second.state.repos()]

    state = HubState()
    repo = state.add_repo("org/model", files={"a.txt": b"a", "b.txt": b"b"}, date=utc(2026, 1, 1))
    assert [c.title for c in repo.commits] == ["initial commit", "Upload folder using huggingface_hub"]
    commit = state.commit("org/model", {"a.txt": None, "c.txt": b"c"}, title="edit", date=utc(2026, 1, 2))
    current = state.repo("org/model")
    assert current is not None and current.sha == commit.sha and current.last_modified == utc(2026, 1, 2)
    assert set(current.files) == {".gitattributes", "b.txt", "c.txt"}
    with pytest.raises(ValueError, match="precedes"):
        state.commit("org/model", {"b.txt": b"x"}, title="back in time", date=utc(2025, 1, 1))
    with pytest.raises(ValueError, match="already exists"):
        state.add_repo("org/model", files={}, date=utc(2026, 1, 3))
    with pytest.raises(ValueError, match="org/name"):
        state.add_repo("no-slash", files={}, date=utc(2026, 1, 3))


def test_helper_files_are_real_formats() -> None:
    drafter = dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, weight_bytes_seed=1)
    assert drafter["model.safetensors"] != dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, 2)["model.safetensors"]
    assert drafter["model.safetensors"] == dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, 1)["model.safetensors"]
    assert json.loads(drafter["config.json"]) == QWEN3_8B_DFLASH_CONFIG
    tensors = load_safetensors(drafter["model.safetensors"])
    assert tuple(tensors["fc.weight"].shape) == (8, 5 * 8) and "layers.4.mlp.down_proj.weight" in tensors
    target = target_files({"model_type": "qwen3"}, card_data={"base_model": "x/y", "license": "mit"})
    assert target["README.md"].startswith(b"---\nbase_model: x/y\n")
    tokenizer = Tokenizer.from_str(target["tokenizer.json"].decode())
    assert tokenizer.encode("hello world").ids == [4, 5]


# ---- the scenario timeline -----------------------------------------------------------------------------------

def test_standard_day_zero(scenario: Scenario) -> None:
    state = scenario.state
    assert scenario.now == DAY_0 == utc(2026, 1, 5) and scenario.day == 0
    assert state.repo("Qwen/Qwen3-8B").sha == QWEN3_8B_SHA  # type: ignore[union-attr]
    assert state.repo("Qwen/Qwen3-4B").sha == QWEN3_4B_SHA  # type: ignore[union-attr]
    assert state.repo(DRAFTER).sha == ZLAB_QWEN3_8B_DFLASH_SHA  # type: ignore[union-attr]
    drafter_config = json.loads(state.repo(DRAFTER).files["config.json"])  # type: ignore[union-attr]
    target_config = json.loads(state.repo("Qwen/Qwen3-8B").files["config.json"])  # type: ignore[union-attr]
    assert drafter_config["hidden_size"] == target_config["hidden_size"] == 4096
    assert drafter_config["num_target_layers"] == target_config["num_hidden_layers"] == 36
    assert drafter_config["dflash_config"] == {"mask_token_id": 151669, "target_layer_ids": [1, 9, 17, 25, 33]}
    fp8 = state.repo("Qwen/Qwen3-8B-FP8")
    assert fp8 is not None and fp8.base_models_at(fp8.head) == (("Qwen/Qwen3-8B",), "quantized")
    finetune = state.repo("acme-labs/Qwen3-8B-Support-FT")
    assert finetune is not None and finetune.base_models_at(finetune.head) == (("Qwen/Qwen3-8B",), "finetune")
    assert state.repo("z-lab/Kimi-K2.6-DFlash").gated == "manual"  # type: ignore[union-attr]
    assert state.repo("Qwen/Qwen3.5-27B") is None


def test_standard_steps(scenario: Scenario) -> None:
    state = scenario.state
    scenario.advance("qwen35_27b_appears")
    base = state.repo("Qwen/Qwen3.5-27B")
    assert base is not None and json.loads(base.files["config.json"])["num_hidden_layers"] == 64

    scenario.advance("drafter_for_qwen35_27b")
    drafter = state.repo("z-lab/Qwen3.5-27B-DFlash")
    assert drafter is not None and drafter.created_at - base.created_at == (scenario.now - utc(2026, 2, 28))
    assert scenario.now - utc(2026, 2, 28) == (utc(2026, 3, 14) - utc(2026, 2, 28))
    config = json.loads(drafter.files["config.json"])
    assert config["num_target_layers"] == 64 and config["dflash_config"]["mask_token_id"] == 248070

    before = state.repo(DRAFTER)
    scenario.advance("weights_replaced")
    replaced = state.repo(DRAFTER)
    assert before is not None and replaced is not None
    assert replaced.sha != before.sha
    assert replaced.files["model.safetensors"] != before.files["model.safetensors"]
    assert {p for p in replaced.files if replaced.files[p] != before.files[p]} == {"model.safetensors"}

    scenario.advance("readme_only_commit")
    readme = state.repo(DRAFTER)
    assert readme is not None
    assert {p for p in readme.files if readme.files[p] != replaced.files[p]} == {"README.md"}

    scenario.advance("repo_renamed")
    renamed = state.repo("meta-llama/Llama-3.1-8B-Instruct")
    assert state.repo("meta-llama/Meta-Llama-3.1-8B-Instruct") is None
    assert renamed is not None and renamed.sha == LLAMA_31_8B_INSTRUCT_SHA
    assert state.renamed_to("meta-llama/Meta-Llama-3.1-8B-Instruct") == "meta-llama/Llama-3.1-8B-Instruct"

    scenario.advance("qwen36_27b_appears")
    successor = state.repo("Qwen/Qwen3.6-27B")
    assert successor is not None and successor.created_at > base.created_at
    assert scenario.applied == list(scenario.steps)


def test_timeline_only_moves_forward(scenario: Scenario) -> None:
    scenario.advance("repo_renamed")
    with pytest.raises(ValueError, match="before now"):
        scenario.advance("qwen35_27b_appears")
    with pytest.raises(ValueError, match="already applied"):
        scenario.advance("repo_renamed")
    with pytest.raises(ValueError, match="unknown step"):
        scenario.advance("nope")


def test_large_scenario_pages_per_org(api: HfApi) -> None:
    large = Scenario.large(n_models=250, n_orgs=5)
    assert len(large.state.repos()) == 250
    with FakeHub(large.state) as big:
        listing = list(HfApi(endpoint=big.url, token=False).list_models(author="org03", sort="created_at",
                                                                         expand=["createdAt"]))
        assert len(listing) == 50
        assert [m.created_at for m in listing] == sorted((m.created_at for m in listing), reverse=True)
        assert big.count("GET", r"^/api/models$") == 1  # 50 fit on one 100-model page
        everything = list(HfApi(endpoint=big.url, token=False).list_models(expand=["sha"]))
        assert len(everything) == 250 and big.count("GET", r"^/api/models$") == 1 + 3


# ---- as strict as the real Hub (issue 12) ----------------------------------------------------------------------

def test_author_is_case_sensitive_and_limit_is_the_page_size_with_keyset_cursors(
    http: httpx.Client, api: HfApi, scenario: Scenario
) -> None:
    assert [m.id for m in api.list_models(author="qwen")] == []
    assert len(list(api.list_models(author="Qwen"))) == 3
    first = http.get("/api/models", params={"author": "Qwen", "sort": "lastModified", "limit": "1"})
    assert [m["id"] for m in first.json()] == ["Qwen/Qwen3-8B-FP8"] and "cursor=" in first.headers["Link"]
    # A repo published between two pages neither repeats nor hides an entry of the pages after the cursor.
    scenario.state.add_repo("Qwen/Qwen9-1B", files={"config.json": b"{}"}, date=utc(2026, 6, 1))
    rest = http.get(first.headers["Link"].split(">")[0].lstrip("<")).json()
    assert [m["id"] for m in rest] == ["Qwen/Qwen3-4B"]
    bad = http.get("/api/models", params={"author": "Qwen", "cursor": "not-a-cursor"})
    assert bad.status_code == 400


def test_ratelimit_headers_on_every_answer_and_429_for_the_whole_bucket(
    http: httpx.Client, scenario: Scenario
) -> None:
    scenario.state.set_rate_limit(2, window_s=60)
    listing = http.get("/api/models", params={"author": "Qwen"})
    assert listing.headers["RateLimit"] == '"api";r=1;t=60'
    assert listing.headers["RateLimit-Policy"] == '"fixed window";"api";q=2;w=60'
    assert http.get(f"/api/models/{DRAFTER}").headers["RateLimit"] == '"api";r=0;t=60'
    refused = http.get(f"/api/models/{DRAFTER}/refs")  # another endpoint, the same bucket
    assert refused.status_code == 429 and refused.headers["RateLimit"].startswith('"api";r=0;t=')


def test_private_repos_exist_only_for_member_tokens_and_revoked_tokens_get_401(
    http: httpx.Client, scenario: Scenario
) -> None:
    state = scenario.state
    state.add_repo("z-lab/Secret-DFlash", files={"config.json": b"{}"}, date=utc(2026, 1, 6), private=True)
    state.add_member("z-lab", "hf_member")
    member = {"Authorization": "Bearer hf_member"}
    params = [("author", "z-lab"), ("expand", "private"), ("limit", "100")]
    anonymous_ids = {m["id"] for m in http.get("/api/models", params=params).json()}
    member_listing = {m["id"]: m["private"] for m in http.get("/api/models", params=params, headers=member).json()}
    assert "z-lab/Secret-DFlash" not in anonymous_ids and member_listing["z-lab/Secret-DFlash"] is True
    hidden = http.get("/api/models/z-lab/Secret-DFlash")
    assert hidden.status_code == 404 and hidden.headers["X-Error-Code"] == "RepoNotFound"
    assert http.get("/api/models/z-lab/Secret-DFlash", headers=member).json()["private"] is True
    state.set_private("z-lab/Secret-DFlash", False)
    assert http.get("/api/models/z-lab/Secret-DFlash").status_code == 200
    state.revoke_token("hf_member")
    for path in ("/api/models", f"/{DRAFTER}/resolve/main/config.json"):
        refused = http.get(path, headers=member)
        assert refused.status_code == 401 and "X-Error-Code" not in refused.headers


def test_create_webhook_as_the_real_client_calls_it(hub: FakeHub, scenario: Scenario, http: httpx.Client) -> None:
    api = HfApi(endpoint=hub.url, token="hf_writer")
    watched = [{"type": "org", "name": "Qwen"}, {"type": "model", "name": DRAFTER}]
    info = api.create_webhook(url="https://hooks.example.org/x", watched=watched, domains=["repo"], secret="s3")
    assert (info.url, info.domains, info.secret, info.disabled) == ("https://hooks.example.org/x", ["repo"], "s3",
                                                                    False)
    assert [(w.type, w.name) for w in info.watched] == [("org", "Qwen"), ("model", DRAFTER)]
    assert scenario.state.webhooks() == [("hf_writer", {
        "id": info.id, "url": "https://hooks.example.org/x", "watched": watched, "domains": ["repo"],
        "secret": "s3", "disabled": False, "job": None})]
    with pytest.raises(BadRequestError):
        api.create_webhook(url="http://plain.example.org/x", watched=watched, domains=["repo"])
    with pytest.raises(BadRequestError):
        api.create_webhook(url="https://hooks.example.org/x", watched=[{"type": "galaxy", "name": "x"}])
    anonymous = http.post("/api/settings/webhooks", json={"watched": watched, "domains": ["repo"],
                                                          "url": "https://hooks.example.org/x"})
    assert anonymous.status_code == 401
    assert http.get("/api/settings/webhooks").status_code == 405
    assert len(scenario.state.webhooks()) == 1
