"""Builds the images the clusters run, locally, with no container registry.

Chain: ``base`` (a Debian JRE 17 root filesystem: pulled when a registry
answers, otherwise made with debootstrap and ``docker import``) ->
``jvm`` (base + the Byteman agent from Maven Central) -> ``kafka:<version>``
and ``pulsar:<version>`` (broker jars resolved from Maven Central).

Each image carries a label with the hash of its inputs (files, version,
parent image id); a build whose inputs are unchanged does nothing.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..clusters import COMPOSE_DIR, SYSTEMS
from ..errors import ImageError
from .docker import LABEL_INPUTS, LABEL_MANAGED, Engine

log = logging.getLogger(__name__)

__all__ = ["BASE_TAG", "JVM_TAG", "HOST_TAG", "image_tag", "ensure_images", "ensure_base",
           "ensure_host_image",
           "SYSTEM_IMAGES", "resolve_jars"]

IMAGES_DIR = COMPOSE_DIR / "images"
BASE_TAG = "chaos-harness/base:bookworm-jre17"
JVM_TAG = "chaos-harness/jvm:17"
#: A public JRE image tried first when no local base exists (a user with a registry gets it).
PUBLIC_BASE = os.environ.get("CHAOS_PUBLIC_BASE", "eclipse-temurin:17-jre")
CACHE_DIR = Path(os.environ.get("CHAOS_CACHE_DIR", "/var/cache/chaos-harness"))
DEBIAN_MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = "openjdk-17-jre-headless,procps,iproute2,netcat-openbsd,ca-certificates"
#: a stand-in host of a nodes file: sshd and the tools of harness.backend.ssh.TOOLS, no Java
HOST_TAG = "chaos-harness/ssh-host:bookworm"
HOST_PACKAGES = "openssh-server,iptables,procps,iproute2,netcat-openbsd"



@dataclass(frozen=True)
class _SystemImage:
    system: str
    maven_group: str
    maven_artifact: str
    #: version prefixes -> the pom's Maven profile (its logging bridge differs by major)
    profiles: tuple[tuple[tuple[str, ...], str], ...] = ()
    default_profile: str | None = None
    #: version prefixes -> the broker artifact where it is not ``maven_artifact``
    artifacts: tuple[tuple[tuple[str, ...], str], ...] = ()

    def artifact(self, version: str) -> str:
        return next((name for prefixes, name in self.artifacts if version.startswith(prefixes)),
                    self.maven_artifact)

    def profile(self, version: str) -> str | None:
        return next((name for prefixes, name in self.profiles if version.startswith(prefixes)),
                    self.default_profile)


#: The broker artifact of each of :data:`~harness.clusters.SYSTEMS`.
SYSTEM_IMAGES = {
    "kafka": _SystemImage("kafka", "org.apache.kafka", "kafka_2.13",
                          profiles=((("0.10.2.",), "kafka0102"), (("0.11.0.",), "kafka0110"),
                                    (("1.", "2."), "kafka12"), (("3.",), "kafka3")),
                          default_profile="kafka4",
                          artifacts=((("0.10.", "0.11."), "kafka_2.11"),
                                     (("1.", "2."), "kafka_2.12"))),
    "pulsar": _SystemImage("pulsar", "org.apache.pulsar", "pulsar-broker",
                           profiles=((("2.", "3.0.", "3.1.", "3.2."), "pulsar30"),
                                     (("3.3.", "4.0."), "pulsar40"), (("4.2.",), "pulsar42"))),
}


def image_tag(system: str, version: str) -> str:
    return f"chaos-harness/{system}:{version}"


def _hash_inputs(*parts: str | bytes | Path) -> str:
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, Path):
            files = sorted(p for p in part.rglob("*")
                           if p.is_file() and "build" not in p.relative_to(part).parts) \
                if part.is_dir() else [part]
            for f in files:
                h.update(str(f.relative_to(IMAGES_DIR)).encode())
                h.update(f.read_bytes())
        else:
            h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def _image_id(engine: Engine, tag: str) -> str:
    return str(engine.client.images.get(tag).id)


def _up_to_date(engine: Engine, tag: str, inputs: str) -> bool:
    labels = engine.image_labels(tag)
    return labels is not None and labels.get(LABEL_INPUTS) == inputs


def ensure_base(engine: Engine) -> str:
    """The base JRE image: reuse, pull, or debootstrap + import."""
    if engine.image_labels(BASE_TAG) is not None:
        return BASE_TAG
    log.info(f"base image: trying {PUBLIC_BASE} from a registry")
    if engine.pull(PUBLIC_BASE):
        engine.client.images.get(PUBLIC_BASE).tag(BASE_TAG)
        return BASE_TAG
    log.info("base image: no registry answers; building a Debian JRE root filesystem with debootstrap")
    return _debootstrap(engine, BASE_TAG, BASE_PACKAGES, "the base image")


def ensure_host_image(engine: Engine) -> str:
    """The stand-in for a host of a nodes file (tests of the SSH backend): Debian with sshd
    and the tools a host needs (harness.backend.ssh.TOOLS), and no Java: ``harness nodes
    prepare`` installs the harness's. Made with debootstrap once, then reused."""
    inputs = hashlib.sha256(HOST_PACKAGES.encode()).hexdigest()[:16]
    if _up_to_date(engine, HOST_TAG, inputs):
        return HOST_TAG
    return _debootstrap(engine, HOST_TAG, HOST_PACKAGES, "the SSH host image", inputs=inputs)


def _debootstrap(engine: Engine, tag: str, packages: str, what: str, inputs: str = "") -> str:
    if shutil.which("debootstrap") is None:
        raise ImageError(f"{what}: debootstrap is not installed and no registry answers: run bin/setup "
                         "(apt-get install debootstrap), or set CHAOS_PUBLIC_BASE to a JRE 17 "
                         "image you can pull")
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(dir=CACHE_DIR) as tmp:
        rootfs = Path(tmp) / "rootfs"
        cmd = ["debootstrap", "--variant=minbase", f"--include={packages}", "bookworm",
               str(rootfs), DEBIAN_MIRROR]
        _run(cmd, "debootstrap")
        tar_path = Path(tmp) / "rootfs.tar"
        _run(["tar", "-C", str(rootfs), "-cf", str(tar_path), "."], "tar of the root filesystem")
        engine.import_rootfs(str(tar_path), tag, changes=[
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            f"LABEL {LABEL_MANAGED}=image",
            *([f"LABEL {LABEL_INPUTS}={inputs}"] if inputs else []),
        ])
    log.info(f"{what}: {tag} imported in {time.monotonic() - t0:.0f}s")
    return tag


def resolve_jars(system: str, version: str, dest: Path) -> None:
    """Copies the runtime classpath of ``system`` ``version`` from Maven Central into ``dest``."""
    spec = SYSTEM_IMAGES[system]
    coord = f"{spec.maven_group}:{spec.artifact(version)}:{version}"
    args = [f"-D{system}.version={version}", "-DincludeScope=runtime"]
    profile = spec.profile(version)
    if profile:
        args.append(f"-P{profile}")
    missing = re.compile(re.escape(f"{spec.artifact(version)}:") + r"(jar|pom):" + re.escape(version))
    _maven_copy(IMAGES_DIR / system / "pom.xml", dest, f"jars of {coord}", args,
                missing=(missing, f"{coord} does not resolve on Maven Central: is {version!r} "
                                  f"a released {system} version?"))


def _maven_copy(pom: Path, dest: Path, what: str, args: list[str],
                missing: tuple[re.Pattern[str], str] | None = None) -> None:
    """``mvn dependency:copy-dependencies`` of ``pom`` into ``dest``, skipped when unchanged."""
    key = _hash_inputs(pom, " ".join(args))
    stamp = dest / ".resolved"
    if stamp.exists() and stamp.read_text() == key:
        return
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    log.info(f"resolving the {what} from Maven Central")
    cmd = ["mvn", "-B", "-q", "-s", str(IMAGES_DIR / "maven-settings.xml"), "-f", str(pom),
           f"-DoutputDirectory={dest}", *args, "dependency:copy-dependencies"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except FileNotFoundError as exc:
        raise ImageError("Maven (mvn) is not installed: run bin/setup (apt-get install maven)") from exc
    except subprocess.TimeoutExpired as exc:
        raise ImageError(f"resolving the {what} from Maven Central took over 30 minutes") from exc
    if out.returncode != 0:
        text = out.stdout + out.stderr
        if missing and missing[0].search(text):
            raise ImageError(missing[1])
        errors = [ln for ln in text.splitlines() if "[ERROR]" in ln][:3]
        raise ImageError(f"resolving the {what} failed: " + " | ".join(errors)[:800])
    stamp.write_text(key)


def _build_jvm(engine: Engine, force: bool) -> str:
    base = ensure_base(engine)
    src = IMAGES_DIR / "jvm"
    inputs = _hash_inputs(src, _image_id(engine, base))
    if not force and _up_to_date(engine, JVM_TAG, inputs):
        return JVM_TAG
    stage = src / "build"
    _maven_copy(src / "pom.xml", stage / "byteman", "Byteman agent",
                ["-Dmdep.stripVersion=true"])
    shutil.copy2(src / "Dockerfile", stage / "Dockerfile")
    log.info(f"building {JVM_TAG}")
    engine.build(str(stage), JVM_TAG, {"BASE": base},
                 {LABEL_INPUTS: inputs, LABEL_MANAGED: "image"})
    return JVM_TAG


def ensure_images(engine: Engine, system: str, version: str, *,
                  force: bool = False) -> str:
    """Builds (or reuses) the image for ``system`` ``version``; returns its tag."""
    if system not in SYSTEMS:
        raise ImageError(f"unknown system {system!r} (known: {', '.join(SYSTEMS)})")
    if not re.fullmatch(r"\d+\.\d+\.\d+(\.\d+)?", version):  # 0.10.2.2: four numbers before 1.0
        raise ImageError(f"version {version!r} is not of the form MAJOR.MINOR.PATCH")
    jvm = _build_jvm(engine, force)
    tag = image_tag(system, version)
    src = IMAGES_DIR / system
    inputs = _hash_inputs(src, version, _image_id(engine, jvm))
    if not force and _up_to_date(engine, tag, inputs):
        log.info(f"{tag}: up to date")
        return tag
    t0 = time.monotonic()
    stage = src / "build" / version
    resolve_jars(system, version, stage / "libs")
    for item in src.iterdir():
        if item.name in ("build", "pom.xml"):
            continue
        target = stage / item.name
        if item.is_dir():
            shutil.copytree(item, target, dirs_exist_ok=True)
        else:
            shutil.copy2(item, target)
    log.info(f"building {tag}")
    engine.build(str(stage), tag, {"JVM_IMAGE": jvm, f"{system.upper()}_VERSION": version},
                 {LABEL_INPUTS: inputs, LABEL_MANAGED: "image"})
    log.info(f"{tag}: built in {time.monotonic() - t0:.0f}s")
    return tag


def _run(cmd: list[str], what: str) -> None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except FileNotFoundError as exc:
        raise ImageError(f"{what}: {cmd[0]} is not installed (run bin/setup)") from exc
    if out.returncode != 0:
        raise ImageError(f"{what} failed (exit {out.returncode}): {(out.stderr or out.stdout)[-600:]}")
