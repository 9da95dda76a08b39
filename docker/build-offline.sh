#!/usr/bin/env bash
# Build docker/Dockerfile where Docker Hub and the PyTorch index are out of reach, with no Docker
# engine: Debian's buildah, a Debian bookworm base image made by debootstrap from Debian's mirror,
# and the torch build of the box's own package index. Then check the image: `airpatrol doctor` and
# `airpatrol demo` inside it, then `airpatrol serve` (with its nginx-rtmp and Mosquitto) taking the
# demo's flight as a simulated DJI Pilot 2 stream (docker/check_image.py).
#
#   sudo bash docker/build-offline.sh [TAG]        (default airpatrol-edge:offline; root: buildah, debootstrap)
#
# Settings (environment):
#   TORCH_SPEC     what pip installs for torch (default: the pinned build, from the box's indexes)
#   PIP_CONF       a pip config for the build steps (default: this box's, see below)
#   PIP_MOUNTS     host folders the pip config points into, mounted read-only at the same paths
#   WORK           scratch folder for the base image's root file system (default /var/tmp/airpatrol-image)
#   CHECK_PORT     the HTTP port of the serve check (default 18080; RTMP and MQTT on 11935 and 11883)
#
# Why buildah with chroot isolation and not podman/crun: crun refuses hybrid cgroup hierarchies
# ("cgroups in hybrid mode not supported") and cannot set the container's rlimits where the box lacks
# CAP_SYS_RESOURCE; chroot isolation needs neither. The RUN steps share the host's network (to reach
# Debian's mirror and PyPI).
set -euo pipefail
cd "$(dirname "$0")/.."
TAG=${1:-airpatrol-edge:offline}
WORK=${WORK:-/var/tmp/airpatrol-image}
BASE=localhost/debian:bookworm-debootstrap
TORCH_SPEC=${TORCH_SPEC:-torch==2.14.1 torchvision==0.29.1}
PIP_MOUNTS=${PIP_MOUNTS:-/opt/pypi /opt/pypi-more /opt/wheels}

for tool in buildah debootstrap; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: apt-get install buildah debootstrap" >&2; exit 1; }
done

log() { echo "[$(date +%T)] $*"; }

if ! buildah inspect --type image "$BASE" >/dev/null 2>&1; then
  log "base image: debootstrap bookworm (minbase) into $WORK/rootfs"
  rm -rf "$WORK/rootfs" && mkdir -p "$WORK"
  debootstrap --variant=minbase bookworm "$WORK/rootfs" http://deb.debian.org/debian >"$WORK/debootstrap.log"
  printf 'deb http://deb.debian.org/debian bookworm main\ndeb http://deb.debian.org/debian bookworm-updates main\ndeb http://deb.debian.org/debian-security bookworm-security main\n' \
    >"$WORK/rootfs/etc/apt/sources.list"
  rm -rf "$WORK/rootfs/var/cache/apt/archives/"*.deb "$WORK/rootfs/var/lib/apt/lists/"*
  ctr=$(buildah from scratch)
  buildah copy "$ctr" "$WORK/rootfs" / >/dev/null
  buildah config --cmd /bin/bash "$ctr"
  buildah commit -q "$ctr" "$BASE" >/dev/null
  buildah rm "$ctr" >/dev/null
  rm -rf "$WORK/rootfs"
fi

# The build steps' pip config: by default this box's (its local indexes and CA bundle), written to a
# file mounted at /etc/pip.conf in the build (pip's site-wide config), so the Dockerfile stays the same.
mounts=()
if [ -z "${PIP_CONF:-}" ]; then
  PIP_CONF="$WORK/pip.conf"
  mkdir -p "$WORK"
  {
    echo "[global]"
    index=$(pip config get global.extra-index-url 2>/dev/null || true)
    [ -n "$index" ] && echo "extra-index-url = $index"
    links=$(pip config get global.find-links 2>/dev/null || true)
    [ -n "$links" ] && echo "find-links = $links"
    echo "cert = /etc/pip-ca.crt"
  } >"$PIP_CONF"
  mounts+=(--volume "/etc/ssl/certs/ca-certificates.crt:/etc/pip-ca.crt:ro")
fi
mounts+=(--volume "$PIP_CONF:/etc/pip.conf:ro")
for dir in $PIP_MOUNTS; do
  [ -d "$dir" ] && mounts+=(--volume "$dir:$dir:ro")
done

log "building $TAG from docker/Dockerfile (torch: $TORCH_SPEC)"
start=$(date +%s)
buildah bud --isolation chroot --layers \
  "${mounts[@]}" \
  --build-arg "BASE_IMAGE=$BASE" --build-arg "TORCH_SPEC=$TORCH_SPEC" \
  -f docker/Dockerfile -t "$TAG" .
log "built in $(( $(date +%s) - start )) s: $(buildah images --format '{{.Size}}' "$TAG" | head -1)"

# The image's own check: a container from it, run with the same isolation.
ctr=$(buildah from "$TAG")
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
run() { buildah run --isolation chroot --user airpatrol --workingdir /var/lib/airpatrol \
  --env AIRPATROL_RTMP_PORT=null --env AIRPATROL_MQTT_PORT=null "$ctr" -- "$@"; }
log "airpatrol doctor (in the image)"
run airpatrol doctor
log "airpatrol demo (in the image)"
run airpatrol demo -q --duration 3 --out /tmp/demo
port=${CHECK_PORT:-18080}
log "airpatrol serve (in the image) on 127.0.0.1:$port, RTMP 11935, MQTT 11883: docker/check_image.py"
buildah run --isolation chroot --user airpatrol --workingdir /var/lib/airpatrol \
  --volume "$PWD/docker/check_image.py:/tmp/check_image.py:ro" \
  --env AIRPATROL_HOST=127.0.0.1 --env AIRPATROL_PORT="$port" \
  --env AIRPATROL_RTMP_PORT=11935 --env AIRPATROL_MQTT_PORT=11883 \
  "$ctr" -- python /tmp/check_image.py /tmp/demo/flight/video.mp4
log "ok: $TAG"
