#!/usr/bin/env bash
# Proves deploy/ on a machine without a Docker engine, with Debian packages only (podman,
# debootstrap, bubblewrap, redis-server; .ci/run installs them). Run as root from anywhere:
#
#   bash deploy/smoke.sh
#
# 1. The deploy files: the Kubernetes manifests against the Kubernetes API's own schemas,
#    without a cluster, strict (kubernetes-validate, in a throwaway venv), and every file against
#    clawgate's settings and docs (tests/component/test_deploy.py).
# 2. The image: a Debian bookworm base made with debootstrap (python3 3.11, like
#    python:3.11-slim; imported into Podman once and reused while its recipe is unchanged),
#    then deploy/Dockerfile built on it with `podman build --isolation chroot`, from scratch.
#    The build uses the package index the host's pip uses and, mounted for the build only,
#    the host's CA bundle (a TLS-intercepting proxy's CA is never baked into the image).
# 3. The image's contents: a non-root numeric user, no compiler, no package manager caches,
#    not the build's CA bundle; its size.
# 4. Running it: the image's root file system (podman create + export), read-only, as the
#    image's user, with no capabilities and no_new_privs (what deploy/k8s asks for), its own
#    environment, working directory and entrypoint; Redis is a throwaway redis-server on the
#    host's loopback. `clawgate --version`, `clawgate doctor` (every check, the sandbox
#    included), a real bash call in the bubblewrap sandbox nested in the image, then
#    `clawgate serve` (/healthz within 5 s, /readyz, /metrics, the image's own HEALTHCHECK)
#    and `clawgate worker` (its metrics port), both stopped with SIGTERM.
#
# Settings (environment): CLAWGATE_SMOKE_IMAGE (the tag built, localhost/clawgate:smoke),
# CLAWGATE_SMOKE_NEW_BASE=1 (make the base again even if Podman has it), PYTHON (the
# project's venv, .venv/bin/python), DEBIAN_MIRROR (default: the host's apt mirror).
# See docs/operations.md, "Proving the image".
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C

IMAGE=${CLAWGATE_SMOKE_IMAGE:-localhost/clawgate:smoke}
PYTHON=${PYTHON:-.venv/bin/python}
SUITE=bookworm
BASE_PACKAGES=python3,python3-venv,ca-certificates
K8S_OLDEST=1.30.0 # the first with pod securityContext.appArmorProfile
HEALTHZ_LIMIT=5   # seconds from starting `clawgate serve` to /healthz answering 200
STARTED=$EPOCHREALTIME

say() { printf 'smoke: %s\n' "$*"; }
fail() {
  printf 'smoke: FAILED: %s\n' "$*" >&2
  exit 1
}
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

[[ $(id -u) == 0 ]] || fail "run as root (podman build, debootstrap)"
for tool in podman debootstrap bwrap redis-server redis-cli setpriv python3; do
  command -v "$tool" >/dev/null || fail "$tool is missing: apt-get install podman debootstrap bubblewrap redis-server"
done
[[ -x $PYTHON ]] || fail "$PYTHON is missing: python3 -m venv .venv && .venv/bin/pip install -e '.[dev]'"

work=$(mktemp -d -t clawgate-smoke.XXXXXX)
chmod 755 "$work" # the image's user must reach the root file system under it
# What this script started, by process id; ended on exit.
gzip_pid="" redis_pid="" serve_bwrap="" worker_bwrap=""
container=""
base_mounted=""
cleanup() {
  local pid
  for pid in $gzip_pid $redis_pid $serve_bwrap $worker_bwrap; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  [[ -z $container ]] || podman rm -f "$container" >/dev/null 2>&1 || true
  [[ -z $base_mounted ]] || podman image unmount "$base_mounted" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# -- 1. the deploy files ------------------------------------------------------------------------
t=$EPOCHREALTIME
if ! "$PYTHON" -m pytest -q -p no:cacheprovider tests/component/test_deploy.py >"$work/pytest.log" 2>&1; then
  cat "$work/pytest.log"
  fail "tests/component/test_deploy.py"
fi
say "deploy files agree with clawgate's settings, policy and docs: tests/component/test_deploy.py ($(grep -Eo '[0-9]+ passed' "$work/pytest.log"))"

python3 -m venv "$work/kv"
if ! "$work/kv/bin/python" -m pip install kubernetes-validate==1.37.0 >"$work/pip.log" 2>&1; then
  tail -20 "$work/pip.log"
  fail "pip install kubernetes-validate"
fi
manifests=()
for path in deploy/k8s/*.yaml; do
  [[ $path == */kustomization.yaml ]] || manifests+=("$path") # not an API object
done
newest=$("$work/kv/bin/kubernetes-validate" --version | awk '{ print $NF }')
for version in "$K8S_OLDEST" "$newest"; do
  if ! "$work/kv/bin/kubernetes-validate" --strict --quiet -k "$version" "${manifests[@]}"; then
    fail "the Kubernetes manifests do not validate against Kubernetes $version"
  fi
done
kinds=$(grep -h '^kind:' "${manifests[@]}" | awk '{ print $2 }' | sort | uniq -c | awk '{ printf "%s%s %s", sep, $1, $2; sep = ", " }')
say "deploy/k8s valid against the Kubernetes $K8S_OLDEST and $newest API schemas, no cluster needed, strict (unknown fields are errors): $kinds ($(since "$t") s)"

# -- 2. the image -------------------------------------------------------------------------------
# The host's apt sources: the first URI whose path ends in $1.
host_apt_uri() {
  {
    cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '$1 == "URIs:" { for (i = 2; i <= NF; i++) print $i }'
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '$1 == "deb" { print ($2 ~ /^\[/ ? $3 : $2) }'
  } | grep -m1 -E "$1/?\$" || true
}
mirror=${DEBIAN_MIRROR:-$(host_apt_uri /debian)}
mirror=${mirror:-http://deb.debian.org/debian}
security=$(host_apt_uri /debian-security)
security=${security:-http://deb.debian.org/debian-security}

make_base() {
  local root=$work/base
  if ! debootstrap --variant=minbase --include="$BASE_PACKAGES" "$SUITE" "$root" "$mirror" >"$work/debootstrap.log" 2>&1; then
    tail -20 "$work/debootstrap.log"
    fail "debootstrap $SUITE from $mirror"
  fi
  # Like debian:bookworm-slim, python:3.11-slim's base: no documentation, manual pages or
  # translations, neither now nor from packages installed later.
  cat >"$root/etc/dpkg/dpkg.cfg.d/slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
EOF
  find "$root/usr/share/doc" -type f ! -name copyright -delete
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$root"/usr/share/{groff,info,lintian,locale,man}/*
  # The release, its updates and security fixes, from the host's mirror; no caches.
  rm -f "$root/etc/apt/sources.list"
  cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/*
  rm -rf "$root"/var/log/apt "$root"/var/log/dpkg.log "$root"/var/log/bootstrap.log
  # The tarball lives only as long as this run.
  tar --numeric-owner -C "$root" -cf "$work/base.tar" .
  rm -rf "$root"
  podman import --change 'CMD ["/bin/bash"]' "$work/base.tar" "$base" >"$work/import.log" 2>&1 ||
    { cat "$work/import.log"; fail "podman import"; }
  rm -f "$work/base.tar"
}

# Named after its recipe: a changed recipe makes a new base; an unchanged one is reused.
recipe=$(printf '%s\n' "$SUITE" "$BASE_PACKAGES" "$(declare -f make_base)" | sha256sum | cut -c1-12)
base=localhost/clawgate-smoke-base:$SUITE-$recipe
t=$EPOCHREALTIME
if [[ ${CLAWGATE_SMOKE_NEW_BASE:-0} == 1 ]]; then
  podman rmi -f "$base" >/dev/null 2>&1 || true
fi
if podman image exists "$base"; then
  say "base image $base: already in Podman's store, reused"
else
  make_base
  say "base image $base: debootstrap $SUITE ($BASE_PACKAGES) from $mirror, imported ($(since "$t") s)"
  # Bases of older recipes are of no more use.
  podman images --format '{{.Repository}}:{{.Tag}}' | grep '^localhost/clawgate-smoke-base:' |
    grep -vxF "$base" | xargs -r podman rmi >/dev/null 2>&1 || true
fi

# pip in the build uses the index the host's pip uses (environment first, then pip's config
# files), a local (file://) index mounted read-only at the same path.
pip_setting() {
  local variable=$1 key=$2
  if [[ -n ${!variable:-} ]]; then
    printf '%s' "${!variable}"
  else
    python3 -m pip config get "global.$key" 2>/dev/null || python3 -m pip config get "install.$key" 2>/dev/null || true
  fi
}
build=(--build-arg "BASE=$base")
index=$(pip_setting PIP_INDEX_URL index-url)
extra=$(pip_setting PIP_EXTRA_INDEX_URL extra-index-url)
[[ -z $index ]] || build+=(--build-arg "PIP_INDEX_URL=$index")
[[ -z $extra ]] || build+=(--build-arg "PIP_EXTRA_INDEX_URL=$extra")
for url in $index $extra; do
  if [[ $url == file://* ]]; then
    # An index's pages link to ../../files/…: mount the directory above its simple/.
    local_index=$(dirname "${url#file://}")
    [[ ! -d $local_index ]] || build+=(-v "$local_index:$local_index:ro")
  fi
done
cert=$(pip_setting PIP_CERT cert)
cert=${cert:-/etc/ssl/certs/ca-certificates.crt}
if [[ -f $cert ]]; then
  build+=(-v "$cert:/etc/ssl/certs/ca-certificates.crt:ro" --build-arg PIP_CERT=/etc/ssl/certs/ca-certificates.crt)
fi
# From scratch every time (--layers=false: no cached or intermediate layers; the machine's
# HTTP(S)_PROXY variables, if any, reach the build by Podman's default).
podman rmi -f "$IMAGE" >/dev/null 2>&1 || true
t=$EPOCHREALTIME
if ! podman build --isolation chroot --pull=never --layers=false --format docker \
  -f deploy/Dockerfile --ignorefile deploy/Dockerfile.dockerignore "${build[@]}" \
  -t "$IMAGE" . >"$work/build.log" 2>&1; then
  tail -40 "$work/build.log"
  fail "podman build"
fi
build_seconds=$(since "$t")
say "built $IMAGE from deploy/Dockerfile in $build_seconds s (index: ${index:-PyPI}${extra:+, extra: $extra})"

# -- 3. its contents ----------------------------------------------------------------------------
rootfs=$work/rootfs
mkdir "$rootfs"
container=$(podman create --no-healthcheck "$IMAGE")
podman export -o "$work/rootfs.tar" "$container"
podman rm "$container" >/dev/null
container=""
tar -C "$rootfs" -xf "$work/rootfs.tar"
# What a registry would carry, roughly (gzip -1 of the flattened file system), measured while
# the image runs below.
gzip -1 -c "$work/rootfs.tar" | wc -c >"$work/compressed" &
gzip_pid=$!

podman image inspect "$IMAGE" >"$work/image.json"
# The image's configuration, one shell-quoted assignment per line.
user="" workingdir="" size="" image_command=() entrypoint=() image_env=() healthcheck=()
eval "$(python3 - "$work/image.json" <<'EOF'
import json, shlex, sys
image = json.load(open(sys.argv[1]))[0]
config = image["Config"]
print("user=" + shlex.quote(config.get("User") or "0"))
print("workingdir=" + shlex.quote(config.get("WorkingDir") or "/"))
print("image_command=(" + " ".join(map(shlex.quote, (config.get("Entrypoint") or []) + (config.get("Cmd") or []))) + ")")
print("entrypoint=(" + " ".join(map(shlex.quote, config.get("Entrypoint") or [])) + ")")
print("image_env=(" + " ".join(map(shlex.quote, config.get("Env") or [])) + ")")
test = (image.get("Healthcheck") or {}).get("Test") or []
print("healthcheck=(" + " ".join(map(shlex.quote, test[1:] if test[:1] == ["CMD"] else [])) + ")")
print(f"size={image['Size']}")
EOF
)"

uid=${user%%:*}
gid=${user#*:}
[[ $uid =~ ^[0-9]+$ && $gid =~ ^[0-9]+$ ]] || fail "USER $user: not numeric (Kubernetes' runAsNonRoot cannot verify a name)"
((uid != 0)) || fail "the image runs as root"
grep -q "^[^:]*:[^:]*:$uid:$gid:" "$rootfs/etc/passwd" || fail "uid $uid is not in the image's /etc/passwd"
home=$(awk -F: -v uid="$uid" '$3 == uid { print $6 }' "$rootfs/etc/passwd")
workdir_path=$(printf '%s\n' "${image_env[@]}" | sed -n 's/^CLAWGATE_WORKDIR=//p')
[[ $(stat -c %u "$rootfs$workdir_path") == "$uid" ]] || fail "$workdir_path does not belong to uid $uid"
((${#healthcheck[@]})) || fail "the image has no HEALTHCHECK"

compilers=$(
  find "$rootfs/usr/bin" "$rootfs/usr/local/bin" "$rootfs/opt/venv/bin" -maxdepth 1 -regextype egrep \
    -regex '.*/(([a-z0-9_]+-)*(cc|c\+\+|gcc|g\+\+|cpp|clang|clang\+\+)(-[0-9.]+)?|rustc|go)' 2>/dev/null
  grep -E '^Package: (gcc|g\+\+|cpp|clang|build-essential|libc6-dev)(-[0-9.]+)?$' "$rootfs/var/lib/dpkg/status"
) || true
[[ -z $compilers && ! -d $rootfs/usr/lib/gcc ]] || fail "a compiler in the image: ${compilers:-/usr/lib/gcc}"
caches=$(
  find "$rootfs/var/cache/apt" -name '*.deb' -o -name '*.bin' 2>/dev/null
  find "$rootfs/var/lib/apt/lists" -mindepth 1 ! -name lock ! -name partial 2>/dev/null
  find "$rootfs" -xdev -type d \( -name .cache -o -name pip-cache -o -name http-v2 \) 2>/dev/null
)
[[ -z $caches ]] || fail "package manager caches in the image: $(head -5 <<<"$caches")"
printf '%s\n' "${image_env[@]}" | grep -q '^PIP_\(INDEX_URL\|EXTRA_INDEX_URL\|CERT\)=' && fail "the build's pip settings reached the image"
base_mounted=$base
base_root=$(podman image mount "$base")
cmp -s "$base_root/etc/ssl/certs/ca-certificates.crt" "$rootfs/etc/ssl/certs/ca-certificates.crt" ||
  fail "the image's CA bundle is not its base's (the build's CA bundle was baked in?)"
podman image unmount "$base" >/dev/null
base_mounted=""
mb=$(awk -v s="$size" 'BEGIN { printf "%.0f", s / 1e6 }')
say "image size: $mb MB ($size bytes, as \`podman images\` counts); runs as uid $uid:$gid (home $home); no compiler, no apt or pip caches, the base's own CA bundle"

# -- 4. running it ------------------------------------------------------------------------------
# in_image [NAME=value …] -- command…: from the image's root file system, read-only, as its
# user, with no capabilities and no_new_privs (Kubernetes: capabilities drop ALL,
# allowPrivilegeEscalation false, readOnlyRootFilesystem), the command as PID 1 of its own
# PID namespace (as with Docker), sharing the host's network (the throwaway Redis). /work and
# /tmp are writable directories of this run (volumes, emptyDirs); deploy/policy is
# /etc/clawgate, read-only (compose.yaml, the clawgate-policy ConfigMap).
mkdir -p "$work/work" "$work/tmp" "$work/policy"
chown "$uid:$gid" "$work/work"
chmod 1777 "$work/tmp"
cp deploy/policy/clawgate.toml "$work/policy/"
info_fd=()
in_image() {
  local env=(--clearenv --setenv HOME "$home")
  local pair
  for pair in "${image_env[@]}"; do
    env+=(--setenv "${pair%%=*}" "${pair#*=}")
  done
  while [[ $1 != -- ]]; do
    env+=(--setenv "${1%%=*}" "${1#*=}")
    shift
  done
  shift
  setpriv --reuid="$uid" --regid="$gid" --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs -- \
    bwrap --ro-bind "$rootfs" / --dev /dev --proc /proc \
    --bind "$work/tmp" /tmp --bind "$work/work" "$workdir_path" --ro-bind "$work/policy" /etc/clawgate \
    --unshare-pid --unshare-ipc --unshare-uts --as-pid-1 --die-with-parent "${info_fd[@]}" \
    --chdir "$workingdir" "${env[@]}" -- "$@"
}

redis_port=$(free_port)
mkdir "$work/redis"
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly yes --appendfsync everysec \
  --dir "$work/redis" >"$work/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 100); do
  [[ $(redis-cli -p "$redis_port" ping 2>/dev/null) == PONG ]] && break
  sleep 0.1
done
[[ $(redis-cli -p "$redis_port" ping 2>/dev/null) == PONG ]] || fail "redis-server did not start: $(tail -3 "$work/redis.log")"

port=$(free_port)
settings=(
  "REDIS_URL=redis://127.0.0.1:$redis_port/0"
  CLAWGATE_POLICY_FILE=/etc/clawgate/clawgate.toml
  CLAWGATE_HOST=127.0.0.1 # the host's network: loopback only
  "CLAWGATE_PORT=$port"
  CLAWGATE_SANDBOX=bwrap # refuse to start without the sandbox
  CLAWGATE_ADMINS=slack:U0SMOKE01
  # As a deployment has it (`clawgate doctor` asks for one): the audit chain's key.
  "CLAWGATE_AUDIT_KEY=smoke:$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"
)

expected="clawgate $(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"
version=$(in_image "${settings[@]}" -- "${entrypoint[@]}" --version)
[[ $version == "$expected" ]] || fail "clawgate --version said '$version', not '$expected'"
say "clawgate --version: $version"

if ! in_image "${settings[@]}" -- "${entrypoint[@]}" doctor >"$work/doctor.log" 2>&1; then
  cat "$work/doctor.log"
  fail "clawgate doctor in the image"
fi
say "clawgate doctor in the image: $(tail -1 "$work/doctor.log")"
sed 's/^/smoke:   /' "$work/doctor.log" | grep -E 'sandbox|redis'

# A bash call the judge lets run unasked, in bubblewrap inside the image: `ls -la` of the work
# dir, where the sandbox shows a secret file (.env) as an empty read-only stand-in
# (docs/security.md, "What an unapproved command can see").
printf 'SMOKE_TOKEN=never-shown-to-an-unapproved-command\n' >"$work/work/.env"
chmod 0644 "$work/work/.env"
chown "$uid:$gid" "$work/work/.env"
printf 'run: ls -la\n' | in_image "${settings[@]}" -- "${entrypoint[@]}" chat >"$work/chat.log" 2>&1 ||
  { cat "$work/chat.log"; fail "clawgate chat in the image"; }
listing=$(grep -E ' \.env$' "$work/chat.log" || true)
if ! grep -qF '[exit code 0]' "$work/chat.log" || ! [[ $listing =~ ^-r--r--r--\ .*\ 0\ [A-Z][a-z][a-z]\  ]] ||
  grep -q never-shown "$work/chat.log"; then
  cat "$work/chat.log"
  fail "the bash call did not run in the sandbox (or saw the work dir's .env)"
fi
say "a bash call ran in the bwrap sandbox inside the image: \`ls -la\` saw the work dir's .env as '$listing' (an empty read-only stand-in; the file holds $(wc -c <"$work/work/.env") bytes)"

# poll URL SECONDS: wait until URL answers 200; print the seconds since $t and the body size.
poll() {
  python3 - "$1" "$2" "$t" <<'EOF'
import sys, time, urllib.error, urllib.request
url, limit, started = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
deadline = time.time() + limit
while True:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            body = answer.read()
            print(f"{time.time() - started:.2f} {len(body)}")
            sys.exit(0)
    except (urllib.error.URLError, OSError) as exc:
        if time.time() > deadline:
            print(f"{url}: {exc}", file=sys.stderr)
            sys.exit(1)
    time.sleep(0.02)
EOF
}
# child PID, from bwrap's --info-fd file
child_pid() {
  local _
  for _ in $(seq 100); do
    if grep -q child-pid "$1" 2>/dev/null; then
      python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["child-pid"])' "$1"
      return
    fi
    sleep 0.05
  done
  fail "no child pid in $1"
}

# `clawgate serve`: the image's own command (ENTRYPOINT + CMD), with its in-process worker.
t=$EPOCHREALTIME
info_fd=(--info-fd 3)
in_image "${settings[@]}" -- "${image_command[@]}" >"$work/serve.log" 2>&1 3>"$work/serve.info" &
serve_bwrap=$!
info_fd=()
if ! healthz=$(poll "http://127.0.0.1:$port/healthz" 30); then
  cat "$work/serve.log"
  fail "clawgate serve never answered /healthz"
fi
healthz_seconds=${healthz%% *}
awk -v s="$healthz_seconds" -v l="$HEALTHZ_LIMIT" 'BEGIN { exit !(s <= l) }' ||
  fail "/healthz answered only after $healthz_seconds s (limit $HEALTHZ_LIMIT s)"
say "clawgate serve (${image_command[*]}) answered /healthz 200 after $healthz_seconds s (limit $HEALTHZ_LIMIT s)"
serve_pid=$(child_pid "$work/serve.info")
readyz=$(poll "http://127.0.0.1:$port/readyz" 10) || { cat "$work/serve.log"; fail "/readyz never answered 200"; }
say "/readyz 200 after ${readyz%% *} s"
metrics=$(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
  "http://127.0.0.1:$port/metrics") || fail "/metrics did not answer 200"
families=$(grep -c '^# TYPE clawgate_' <<<"$metrics" || true)
((families > 0)) || fail "/metrics has no clawgate_ metric"
say "/metrics 200: $families clawgate_ metric families"
in_image "${settings[@]}" -- "${healthcheck[@]}" || fail "the image's HEALTHCHECK failed against a healthy serve"
say "the image's HEALTHCHECK (${healthcheck[0]} …) passes"
# The web console's pages and files ship in the image: its sign-in page and its stylesheet.
console=$(python3 - "http://127.0.0.1:$port/console/" <<'PY'
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=5)
except urllib.error.HTTPError as answer:
    print(answer.code, answer.read().decode())
PY
) || fail "/console/ did not answer"
[[ $console == 401* && $console == *"Sign in with a link"* ]] ||
  fail "/console/ did not render its sign-in page from the image: ${console:0:200}"
poll "http://127.0.0.1:$port/console/static/console.css" 5 >/dev/null ||
  fail "/console/static/console.css is not in the image"
say "/console/ renders its sign-in page (401) and serves its stylesheet"

# `clawgate worker` (as deploy/k8s/worker.yaml runs it): its /healthz, /readyz and /metrics.
metrics_port=$(free_port)
t=$EPOCHREALTIME
info_fd=(--info-fd 3)
in_image "${settings[@]}" "CLAWGATE_METRICS_PORT=$metrics_port" -- "${entrypoint[@]}" worker \
  >"$work/worker.log" 2>&1 3>"$work/worker.info" &
worker_bwrap=$!
info_fd=()
worker_ready=$(poll "http://127.0.0.1:$metrics_port/readyz" 15) || { cat "$work/worker.log"; fail "clawgate worker: /readyz"; }
poll "http://127.0.0.1:$metrics_port/metrics" 5 >/dev/null || fail "clawgate worker: /metrics"
say "clawgate worker: /readyz 200 after ${worker_ready%% *} s, /metrics 200 on CLAWGATE_METRICS_PORT"
worker_pid=$(child_pid "$work/worker.info")

# SIGTERM, as Docker and Kubernetes stop a container: both exit 0 within the grace period.
t=$EPOCHREALTIME
kill -TERM "$serve_pid" "$worker_pid"
serve_code=0
wait "$serve_bwrap" || serve_code=$?
worker_code=0
wait "$worker_bwrap" || worker_code=$?
serve_bwrap="" worker_bwrap=""
((serve_code == 0)) || { tail -20 "$work/serve.log"; fail "clawgate serve exited $serve_code on SIGTERM"; }
((worker_code == 0)) || { tail -20 "$work/worker.log"; fail "clawgate worker exited $worker_code on SIGTERM"; }
say "serve and worker exited 0 on SIGTERM ($(since "$t") s)"

# The audit chain from the image: an operator command records an entry, sealed with the key;
# `clawgate audit verify` checks it. And the image has the OpenTelemetry extra.
in_image "${settings[@]}" -- "${entrypoint[@]}" console link --as slack:U0SMOKE01 >/dev/null ||
  fail "clawgate console link in the image"
verified=$(in_image "${settings[@]}" -- "${entrypoint[@]}" audit verify) ||
  fail "clawgate audit verify in the image: $verified"
[[ $verified == "Audit chain intact"* ]] || fail "clawgate audit verify said: ${verified:0:200}"
say "clawgate audit verify in the image: ${verified%%$'\n'*}"
in_image "${settings[@]}" -- python -c \
  'import opentelemetry.sdk.trace, opentelemetry.exporter.otlp.proto.http' ||
  fail "the image lacks the OpenTelemetry extra"
say "the image has the OpenTelemetry SDK and OTLP/HTTP exporter (the otel extra)"

wait "$gzip_pid" || fail "gzip"
gzip_pid=""
gz_mb=$(awk -v s="$(cat "$work/compressed")" 'BEGIN { printf "%.0f", s / 1e6 }')
say "PASSED in $(since "$STARTED") s: build $build_seconds s, /healthz after $healthz_seconds s, image $mb MB ($gz_mb MB gzip -1 compressed) ($IMAGE)"
