"""The build's cache decisions (build, reuse, re-tag, refuse) and save's, over a recording fake engine."""

from __future__ import annotations

import itertools

import pytest

from slurmk8s import debian
from slurmk8s.images import build, recipes
from slurmk8s.images.errors import ImageError

SERIES = "26.05"
RELEASE = debian.SLURM_RELEASES[SERIES]


class FakeEngine:
    """Images as a dict; records builds, tags and removals. One store shared by every instance."""

    store: dict[str, dict] = {}
    calls: list[tuple] = []
    resolution = ""
    ids = itertools.count(1)

    def __init__(self, name, log_file, progress=None):
        self.log_file = log_file

    def check(self):
        pass

    def _find(self, ref):
        return next((i for i, img in self.store.items() if ref in img["refs"] or ref == i), None)

    def image_id(self, ref):
        return self._find(ref)

    def labels(self, ref):
        found = self._find(ref)
        return None if found is None else dict(self.store[found]["labels"])

    def images_labelled(self, label, value):
        return sorted(i for i, img in self.store.items() if img["labels"].get(label) == value)

    def run_script(self, image, script, args, mounts, network, what, timeout=0):
        self.calls.append((what.split()[0], network))  # "resolve" or "download"
        return self.resolution if what.startswith("resolve") else ""

    def _untag(self, ref):
        for img in self.store.values():
            img["refs"].discard(ref)

    def build(self, containerfile, context, tags, labels, what, timeout=0):
        self.calls.append(("build", tags[0]))
        for tag in tags:
            self._untag(tag)
        self.store[f"sha256:{next(self.ids)}"] = {"refs": set(tags), "labels": dict(labels)}

    def tag(self, image, ref):
        self.calls.append(("tag", ref))
        self._untag(ref)
        self.store[image]["refs"].add(ref)

    def remove_if_unused(self, image_id):
        if self.store[image_id]["refs"]:
            return False
        self.calls.append(("remove", image_id))
        del self.store[image_id]
        return True

    def save(self, ref, path):
        self.calls.append(("save", ref))
        path.write_text(ref)


def resolution(versions: dict[str, str]) -> str:
    """apt-get -s output per image: its main package at a version, plus one shared library."""
    lines = []
    for r in recipes.recipes_for(SERIES):
        version = versions.get(r.name, "1:11.8.9+ds-2" if r.name == "mariadb" else "26.05.5-1")
        lines += [f"@@slurmk8s image {r.name}", f"Inst {r.version_package} ({version} Debian:testing [amd64])",
                  f"Inst libfoo ({versions.get('libfoo', '1.0-1')} Debian:testing [amd64])"]
    return "\n".join(lines) + "\n"


@pytest.fixture
def engine(monkeypatch, tmp_path):
    FakeEngine.store, FakeEngine.calls = {}, []
    files = recipes.base_files(RELEASE, debian.debian_mirror(), debian.security_mirror())
    FakeEngine.store["sha256:base"] = {"refs": {f"{recipes.DEFAULT_BASE_REPO}:{RELEASE.suite}"},
                                       "labels": {recipes.LABEL_BASE_KEY: recipes.base_key(RELEASE, files)}}
    FakeEngine.resolution = resolution({})
    monkeypatch.setattr(build, "Engine", FakeEngine)
    return FakeEngine("podman", tmp_path / "fake.log")  # a view of the same store the build uses


def run(tmp_path, registry=recipes.DEFAULT_REGISTRY):
    return build.build_series(SERIES, build.BuildOptions(registry=registry, cache_dir=tmp_path), log=lambda _: None)


def outcomes(results):
    return {r.name: r.outcome for r in results}


def test_cold_builds_every_image_then_warm_reuses_them(engine, tmp_path):
    cold = run(tmp_path)
    assert set(outcomes(cold).values()) == {build.BUILT}
    assert [c for c in engine.calls if c[0] in ("resolve", "download")] == [("resolve", "host"), ("download", "host")]
    slurmctld = engine.store[engine.image_id("localhost/slurmk8s/slurmctld:26.05-debian14")]
    assert slurmctld["refs"] == {"localhost/slurmk8s/slurmctld:26.05-debian14", "localhost/slurmk8s/slurmctld:26.05.5-debian14"}
    assert slurmctld["labels"][recipes.LABEL_KEY] == cold[0].key and slurmctld["labels"][recipes.LABEL_VERSION] == "26.05.5"
    engine.calls.clear()
    warm = run(tmp_path)
    assert set(outcomes(warm).values()) == {build.CACHED}
    assert [c[0] for c in engine.calls] == ["resolve"]
    assert [r.key for r in warm] == [r.key for r in cold]


def test_a_new_package_version_rebuilds_only_the_images_that_carry_it(engine, tmp_path):
    run(tmp_path)
    old_slurmd = engine.image_id("localhost/slurmk8s/slurmd:26.05-debian14")
    FakeEngine.resolution = resolution({}).replace(
        "@@slurmk8s image slurmd\nInst slurmd (26.05.5-1 Debian:testing [amd64])\nInst libfoo (1.0-1",
        "@@slurmk8s image slurmd\nInst slurmd (26.05.5-1 Debian:testing [amd64])\nInst libfoo (1.0-2")
    engine.calls.clear()
    again = outcomes(run(tmp_path))
    assert again.pop("slurmd") == build.BUILT and set(again.values()) == {build.CACHED}
    assert [c[0] for c in engine.calls if c[0] != "remove"] == ["resolve", "download", "build"]
    assert ("remove", old_slurmd) in engine.calls  # the build it replaced had no name left


def test_a_new_slurm_release_keeps_the_old_full_version_tag(engine, tmp_path):
    run(tmp_path)
    old = engine.image_id("localhost/slurmk8s/slurmctld:26.05-debian14")
    FakeEngine.resolution = resolution({"slurmctld": "26.05.6-1"})
    result = next(r for r in run(tmp_path) if r.name == "slurmctld")
    assert result.outcome == build.BUILT and result.version == "26.05.6"
    assert engine.image_id("localhost/slurmk8s/slurmctld:26.05-debian14") != old
    assert engine.image_id("localhost/slurmk8s/slurmctld:26.05.5-debian14") == old


def test_another_registry_retags_the_same_images(engine, tmp_path):
    run(tmp_path)
    engine.calls.clear()
    moved = run(tmp_path, registry="registry.example.org/hpc")
    assert set(outcomes(moved).values()) == {build.RETAGGED}
    assert not [c for c in engine.calls if c[0] == "build"]
    assert engine.image_id("registry.example.org/hpc/slurmd:26.05-debian14") == \
        engine.image_id("localhost/slurmk8s/slurmd:26.05-debian14")


def test_a_suite_that_moved_to_another_slurm_series_is_refused(engine, tmp_path):
    FakeEngine.resolution = resolution({"slurmctld": "26.11.0-1"})
    with pytest.raises(ImageError, match=r"^forky gives Slurm 26\.11\.0, not 26\.05\.x: the suite moved on"):
        run(tmp_path)


def test_save_writes_each_image_once_per_image_id(engine, tmp_path):
    with pytest.raises(ImageError, match=r"^localhost/slurmk8s/slurmctld:26\.05-debian14 is not built: "
                                         r"run slurmk8s images build --slurm 26\.05$"):
        build.save_series(SERIES, build.BuildOptions(cache_dir=tmp_path), tmp_path / "out", log=lambda _: None)
    run(tmp_path)
    first = build.save_series(SERIES, build.BuildOptions(cache_dir=tmp_path), tmp_path / "out", log=lambda _: None)
    assert [(p.name, written) for p, written in first] == [(f"{n}_26.05-debian14.tar", True) for n in recipes.image_names()]
    assert first[0][0].read_text() == "localhost/slurmk8s/slurmctld:26.05-debian14"
    second = build.save_series(SERIES, build.BuildOptions(cache_dir=tmp_path), tmp_path / "out", log=lambda _: None)
    assert [written for _, written in second] == [False] * 6
