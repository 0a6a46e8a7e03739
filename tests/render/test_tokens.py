"""spec.restapi.tokens (issue 27, item 4): each user's slurmrestd token in a Secret, refreshed by a CronJob
of Kubernetes' own, filled at once by a Job named by its content; and the checks of the profile."""

from __future__ import annotations

import base64
import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from slurmk8s import naming
from slurmk8s.errors import ProfileError
from slurmk8s.podside import tokens as podside_tokens
from slurmk8s.profile.loader import load_profile
from slurmk8s.profile.restapi import USER_NAME, TokenSecret, refresh_minutes
from slurmk8s.profile.schema import profile_schema
from slurmk8s.render import render
from slurmk8s.render.k8s.tokens import PROGRAM_DIR

ROOT = Path(__file__).resolve().parents[2]
GPU_IB = ROOT / "profiles" / "gpu-ib.yaml"


def doc_with(tokens: list[dict], *, restapi: bool = True, users: tuple[str, ...] = ("ada", "max")) -> dict:
    doc = yaml.safe_load(GPU_IB.read_text())
    doc["spec"]["restapi"] = {"enabled": restapi, "tokens": tokens}
    doc["spec"]["identity"] = {"users": [{"name": u, "uid": 2001 + i} for i, u in enumerate(users)]}
    doc["spec"].pop("scheduling", None)
    return doc


def load(doc: dict):
    return load_profile(yaml.safe_dump(doc, sort_keys=False).encode(), "p.yaml")


def problems(doc: dict) -> list[str]:
    with pytest.raises(ProfileError) as info:
        load(doc)
    return [line.split(": ", 1)[1] for line in str(info.value).splitlines()]  # without the FILE:LINE:COL


def by_kind(bundle) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for obj in bundle.objects:
        if obj["metadata"]["labels"].get(naming.LABEL_COMPONENT) == naming.TOKENS:
            out.setdefault(obj["kind"], []).append(obj)
    return out


def test_the_tokens_role_may_patch_the_token_secrets_by_name_and_nothing_else() -> None:
    bundle = render(load(doc_with([{"user": "ada"}, {"user": "max", "lifespan": 86400}])))
    objects = by_kind(bundle)
    assert sorted(objects) == ["ConfigMap", "CronJob", "Job", "Role", "RoleBinding", "ServiceAccount"]
    (role,) = objects["Role"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["patch"],
                              "resourceNames": ["research-token-ada", "research-token-max"]}]
    (binding,) = objects["RoleBinding"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "research-tokens", "namespace": "hpc"}]
    # Each Secret is made once, empty, by up; only these may change after creation (secrets.py: immutable).
    token_secrets = [s for s in bundle.secrets if s.component == naming.TOKENS]
    assert [(s.name, s.key, s.kind) for s in token_secrets] == [
        ("research-token-ada", "token", "empty"), ("research-token-max", "token", "empty")]


def test_the_job_and_the_cronjob_run_one_pod_with_the_users_of_the_profile() -> None:
    bundle = render(load(doc_with([{"user": "ada"}, {"user": "max", "lifespan": 86400}])))
    objects = by_kind(bundle)
    (cronjob,), (job,), (configmap,) = objects["CronJob"], objects["Job"], objects["ConfigMap"]
    assert cronjob["spec"]["jobTemplate"]["spec"]["template"] == job["spec"]["template"]
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "research-tokens" and pod["automountServiceAccountToken"] is True
    (mint,) = pod["containers"]
    assert mint["command"] == ["python3", f"{PROGRAM_DIR}/tokens.py"]
    assert mint["securityContext"]["runAsUser"] == naming.SLURM_UID  # SlurmUser may ask for anyone's token
    assert json.loads(configmap["data"]["settings.json"]) == {"tokens": [
        {"lifespan": 3600, "secret": "research-token-ada", "user": "ada"},
        {"lifespan": 86400, "secret": "research-token-max", "user": "max"}]}
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"


@pytest.mark.parametrize(("lifespans", "schedule"), [
    ((900,), "*/5 * * * *"), ((3600,), "*/20 * * * *"), ((3600, 900), "*/5 * * * *"), ((5400,), "*/30 * * * *"),
    ((86400,), "0 * * * *"), ((10799,), "*/30 * * * *")])
def test_the_schedule_refreshes_within_a_third_of_the_shortest_lifespan(lifespans, schedule) -> None:
    users = ("ada", "max")
    doc = doc_with([{"user": users[i], "lifespan": s} for i, s in enumerate(lifespans)])
    (cronjob,) = by_kind(render(load(doc)))["CronJob"]
    assert cronjob["spec"]["schedule"] == schedule
    every = refresh_minutes(tuple(TokenSecret("u", s) for s in lifespans))
    assert every * 60 * 3 <= min(lifespans)
    assert cronjob["spec"]["startingDeadlineSeconds"] == every * 60


def test_a_changed_user_list_is_a_new_job_and_the_same_profile_the_same_job() -> None:
    def job_name(doc):
        (job,) = by_kind(render(load(doc)))["Job"]
        return job["metadata"]["name"]
    one = doc_with([{"user": "ada"}])
    assert job_name(one) == job_name(copy.deepcopy(one))
    assert re.fullmatch(r"research-tokens-[0-9a-f]{8}", job_name(one))
    assert job_name(one) != job_name(doc_with([{"user": "ada"}, {"user": "max"}]))


def test_no_tokens_render_nothing_of_them() -> None:
    bundle = render(load(doc_with([])))
    assert by_kind(bundle) == {}
    assert not [s for s in bundle.secrets if s.component == naming.TOKENS]


@pytest.mark.parametrize(("tokens", "restapi", "expected"), [
    ([{"user": "ada"}], False,
     "spec.restapi.tokens: tokens are for slurmrestd: set spec.restapi.enabled: true, or drop the tokens"),
    ([{"user": "ada"}, {"user": "ada"}], True, "spec.restapi.tokens[1].user: user 'ada' is listed twice"),
    ([{"user": "lin"}], True, "spec.restapi.tokens[0].user: user 'lin' is not declared; slurmctld could not resolve "
                              "the token's user: declare it under spec.identity.users (declared: a-b, a_b, ada, max)"),
    ([{"user": "a_b"}, {"user": "a-b"}], True,
     "spec.restapi.tokens[1].user: user 'a-b' gets the same Secret name as 'a_b'"),
], ids=["restapi-off", "twice", "undeclared", "same-secret"])
def test_bad_token_lists_get_one_located_line(tokens, restapi, expected) -> None:
    doc = doc_with(tokens, restapi=restapi, users=("ada", "max", "a_b", "a-b"))
    assert expected in problems(doc)


def test_root_and_slurm_need_no_declaration() -> None:
    profile = load(doc_with([{"user": "root"}, {"user": "slurm"}]))
    assert [t.user for t in profile.restapi_tokens] == ["root", "slurm"]


def test_the_cli_user_name_rule_is_the_schemas() -> None:
    schema = profile_schema()
    item = schema["properties"]["spec"]["properties"]["restapi"]["properties"]["tokens"]["items"]["properties"]["user"]
    identity = schema["properties"]["spec"]["properties"]["identity"]["properties"]["users"]["items"]["properties"]
    for rule in (item, identity["name"]):
        pattern = re.compile(rule["pattern"])
        for name in ("ada", "_svc", "a-b", "a_b9", "9ab", "-ab", "Ada", "a.b", "a" * 32, "a" * 33, ""):
            assert bool(USER_NAME.match(name)) == bool(pattern.match(name) and len(name) <= rule["maxLength"]), name


# ----------------------------------------------------------------------------- the program in the pod

JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdW4iOiJhZGEifQ.c2ln"


class FakeApi:
    namespace = "hpc"

    def __init__(self, refuse: tuple[str, ...] = ()):
        self.patches: list[tuple[str, dict]] = []
        self.refuse = refuse

    def merge_patch(self, path, body):
        if any(path.endswith(r) for r in self.refuse):
            raise OSError(f"PATCH {path}: 403 Forbidden")
        self.patches.append((path, body))
        return {}


def test_parse_token_takes_scontrols_answer_and_nothing_else() -> None:
    assert podside_tokens.parse_token(f"SLURM_JWT={JWT}\n") == JWT
    for bad in ("", "SLURM_JWT=\n", "scontrol: error: Invalid user\n", f"SLURM_JWT={JWT}\nSLURM_JWT={JWT}\n", "x=a.b.c"):
        with pytest.raises(ValueError, match="scontrol token answered"):
            podside_tokens.parse_token(bad)
    assert podside_tokens.token_argv("ada", 3600.4) == ["scontrol", "token", "username=ada", "lifespan=3600"]


def test_refresh_writes_each_token_and_goes_on_past_a_failure() -> None:
    api = FakeApi(refuse=("research-token-max",))
    asked: list[list[str]] = []

    def scontrol(argv):
        asked.append(argv)
        if argv[2] == "username=lin":
            raise ValueError("scontrol token failed (1): Invalid user")
        return f"SLURM_JWT={JWT}\n"
    said: list[str] = []
    tokens = [{"user": u, "lifespan": 3600, "secret": f"research-token-{u}"} for u in ("ada", "lin", "max")]
    failed = podside_tokens.refresh(api, tokens, run=scontrol, clock=lambda: 0, say=said.append)
    assert failed == ["lin", "max"]
    assert [a[2] for a in asked] == ["username=ada", "username=lin", "username=max"]
    ((path, body),) = api.patches
    assert path == "/api/v1/namespaces/hpc/secrets/research-token-ada"
    assert {k: base64.b64decode(v).decode() for k, v in body["data"].items()} == {
        "token": JWT, "user": "ada", "expires": "1970-01-01T01:00:00Z"}
    assert said[0] == "slurmk8s-tokens: Secret research-token-ada holds a token of ada until 1970-01-01T01:00:00Z"
    assert "Invalid user" in said[1] and "403" in said[2]
